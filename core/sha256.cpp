#include "core/sha256.h"

#include <openssl/evp.h>

#include <memory>
#include <stdexcept>

namespace tollgate {

namespace {

// The digest is fetched once and each thread keeps one context: creating
// both per call cost more than hashing a typical event.
const EVP_MD* Sha256Md() {
  static const EVP_MD* md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

struct CtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

}  // namespace

Digest Sha256(std::initializer_list<std::string_view> parts) {
  thread_local std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  Digest out{};
  unsigned int len = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx.get(), Sha256Md(), nullptr) == 1;
  for (std::string_view p : parts) ok = ok && EVP_DigestUpdate(ctx.get(), p.data(), p.size()) == 1;
  if (!ok || EVP_DigestFinal_ex(ctx.get(), out.data(), &len) != 1)
    throw std::runtime_error("OpenSSL SHA-256 failed");
  return out;
}

Digest Sha256(std::string_view a, std::string_view b) { return Sha256({a, b}); }

std::string Sha256Hex(std::string_view data) { return ToHex(Sha256(data)); }

std::string ToHex(const uint8_t* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[data[i] >> 4];
    s[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return s;
}

bool DigestFromHex(std::string_view hex, Digest* out) {
  if (hex.size() != 64) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace tollgate
