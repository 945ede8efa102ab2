// Address classification for http_request's SSRF guard (Stripe smokescreen's
// rules): an address is reachable only if it is globally routable unicast,
// or inside a CIDR the operator allowed (execute.network.allow_cidrs).
// Pure functions over bytes; thread-safe.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tollgate {

struct IpAddr {
  bool v6 = false;
  std::array<uint8_t, 16> b{};  // v4 uses b[0..3]
  std::string ToString() const;
};

struct Cidr {
  IpAddr base;
  int prefix = 0;
  bool Contains(const IpAddr& a) const;
};

// Strict textual forms only (inet_pton): "10.0.0.1", "::1". A URL host in
// another numeric form (127.1, 0x7f000001, 2130706433) is not parsed here:
// the resolver turns it into an address, which is what gets classified.
bool ParseIp(const std::string& text, IpAddr* out);
// "10.0.0.0/8", "::1/128"; a bare address means a single-host prefix.
bool ParseCidr(const std::string& text, Cidr* out);
bool FromSockaddr(const sockaddr* sa, IpAddr* out);

// "" when `a` is global unicast; otherwise why not (e.g. "loopback",
// "private (RFC 1918)", "IPv4-mapped IPv6"). Embedded IPv4 in 6to4 is
// classified too; IPv4-mapped/compatible, NAT64 and Teredo are refused
// outright (their reach depends on the network's translators).
std::string NonGlobalReason(const IpAddr& a);

// Whether a connection to `a` is allowed: global, or inside `allow`.
// On refusal *why says why.
bool AddressAllowed(const IpAddr& a, const std::vector<Cidr>& allow, std::string* why);

}  // namespace tollgate
