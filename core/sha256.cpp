#include "core/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace tollgate {

Digest Sha256(std::string_view a, std::string_view b) {
  Digest out{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned int len = 0;
  if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx, a.data(), a.size()) != 1 ||
      EVP_DigestUpdate(ctx, b.data(), b.size()) != 1 ||
      EVP_DigestFinal_ex(ctx, out.data(), &len) != 1) {
    EVP_MD_CTX_free(ctx);
    throw std::runtime_error("OpenSSL SHA-256 failed");
  }
  EVP_MD_CTX_free(ctx);
  return out;
}

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
