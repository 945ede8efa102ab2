// libFuzzer target: untrusted JSON text through the bounded parser, then
// everything the pipeline does with a parsed value before logging it
// (redaction, canonical bytes, the args hash). Canonical bytes must parse
// back to themselves (docs/log_format.md, "Canonical bytes").
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/canonical_json.h"
#include "core/messages.h"
#include "core/redact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tollgate;
  Json v;
  if (!ParseJson(std::string_view(reinterpret_cast<const char*>(data), size), &v).ok()) return 0;
  RedactSecrets(v, DefaultSecretKeyPatterns());
  std::string bytes, again;
  if (!CanonicalBytes(v, &bytes).ok()) return 0;
  Json back;
  if (!ParseJson(bytes, &back).ok() || !CanonicalBytes(back, &again).ok() || again != bytes) std::abort();
  (void)ArgsHash(v);
  return 0;
}
