// libFuzzer target: URL reference resolution and normalisation, and path
// normalisation (core/url.h), which decide matches policy against and execute
// fetches. Input: "base\nref". The normal form must be a fixed point (what
// decide matched is what a second normalisation, e.g. execute's, yields) and
// must never carry userinfo.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tollgate;
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string base = nl == std::string::npos ? "" : in.substr(0, nl);
  const std::string ref = nl == std::string::npos ? in : in.substr(nl + 1);
  NormalUrl u, again;
  std::string why;
  if (NormalizeUrl(ref, base, &u, &why, Userinfo::kDrop)) {
    if (!NormalizeUrl(u.full, "", &again, &why) || again.full != u.full) std::abort();
    if (u.full.compare(0, u.scheme.size() + 3 + u.host.size(), u.scheme + "://" + u.host) != 0) std::abort();
  }
  const std::string p = NormalizePath(ref);
  if (NormalizePath(p) != p) std::abort();
  return 0;
}
