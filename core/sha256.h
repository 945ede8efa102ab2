// SHA-256 over byte strings (OpenSSL EVP). Thread-safe: no shared state.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tollgate {

using Digest = std::array<uint8_t, 32>;

// SHA-256 of the concatenation of the given parts.
Digest Sha256(std::string_view a, std::string_view b = {});
Digest Sha256(std::initializer_list<std::string_view> parts);
std::string Sha256Hex(std::string_view data);

std::string ToHex(const uint8_t* data, size_t n);
inline std::string ToHex(const Digest& d) { return ToHex(d.data(), d.size()); }
// False unless `hex` is exactly 64 lowercase hex digits.
bool DigestFromHex(std::string_view hex, Digest* out);

// The chain starts from 32 zero bytes (docs/log_format.md).
inline constexpr Digest kGenesisHash{};

}  // namespace tollgate
