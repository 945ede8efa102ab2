#include "execute/net_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace tollgate {
namespace {

struct Range {
  const char* cidr;
  const char* why;
};

// Non-global IPv4 ranges (IANA special-purpose registry, smokescreen's list).
constexpr Range kV4[] = {
    {"0.0.0.0/8", "this network (0.0.0.0/8)"},
    {"10.0.0.0/8", "private (RFC 1918)"},
    {"100.64.0.0/10", "carrier-grade NAT (100.64.0.0/10)"},
    {"127.0.0.0/8", "loopback"},
    {"169.254.0.0/16", "link-local (incl. cloud metadata)"},
    {"172.16.0.0/12", "private (RFC 1918)"},
    {"192.0.0.0/24", "IETF protocol assignments"},
    {"192.0.2.0/24", "documentation (TEST-NET-1)"},
    {"192.31.196.0/24", "AS112"},
    {"192.52.193.0/24", "AMT"},
    {"192.88.99.0/24", "6to4 relay anycast"},
    {"192.168.0.0/16", "private (RFC 1918)"},
    {"192.175.48.0/24", "AS112 direct delegation"},
    {"198.18.0.0/15", "benchmarking"},
    {"198.51.100.0/24", "documentation (TEST-NET-2)"},
    {"203.0.113.0/24", "documentation (TEST-NET-3)"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved"},
    {"255.255.255.255/32", "broadcast"},
};

// Non-global IPv6 ranges. Order matters only for the reason given.
constexpr Range kV6[] = {
    {"::/128", "unspecified"},
    {"::1/128", "loopback"},
    {"::ffff:0:0/96", "IPv4-mapped IPv6"},
    {"::ffff:0:0:0/96", "IPv4-translated IPv6"},
    {"::/96", "IPv4-compatible IPv6"},
    {"64:ff9b::/96", "NAT64"},
    {"64:ff9b:1::/48", "local-use NAT64"},
    {"100::/64", "discard-only"},
    {"2001::/32", "Teredo"},
    {"2001::/23", "IETF protocol assignments"},
    {"2001:db8::/32", "documentation"},
    {"2001:10::/28", "ORCHID"},
    {"2001:20::/28", "ORCHIDv2"},
    {"3fff::/20", "documentation"},
    {"5f00::/16", "segment routing SIDs"},
    {"fc00::/7", "unique local (ULA)"},
    {"fe80::/10", "link-local"},
    {"fec0::/10", "site-local (deprecated)"},
    {"ff00::/8", "multicast"},
};

template <size_t N>
std::vector<std::pair<Cidr, std::string>> Build(const Range (&ranges)[N]) {
  std::vector<std::pair<Cidr, std::string>> out;
  for (const auto& r : ranges) {
    Cidr c;
    ParseCidr(r.cidr, &c);
    out.emplace_back(c, r.why);
  }
  return out;
}

const std::vector<std::pair<Cidr, std::string>>& V4() {
  static const auto v = Build(kV4);
  return v;
}
const std::vector<std::pair<Cidr, std::string>>& V6() {
  static const auto v = Build(kV6);
  return v;
}

}  // namespace

std::string IpAddr::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, b.data(), buf, sizeof buf);
  return buf;
}

bool Cidr::Contains(const IpAddr& a) const {
  if (a.v6 != base.v6) return false;
  int bits = prefix;
  for (int i = 0; bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((a.b[i] & mask) != (base.b[i] & mask)) return false;
  }
  return true;
}

bool ParseIp(const std::string& text, IpAddr* out) {
  IpAddr a;
  if (inet_pton(AF_INET, text.c_str(), a.b.data()) == 1) {
    a.v6 = false;
  } else if (inet_pton(AF_INET6, text.c_str(), a.b.data()) == 1) {
    a.v6 = true;
  } else {
    return false;
  }
  *out = a;
  return true;
}

bool ParseCidr(const std::string& text, Cidr* out) {
  const auto slash = text.find('/');
  Cidr c;
  if (!ParseIp(text.substr(0, slash), &c.base)) return false;
  const int max = c.base.v6 ? 128 : 32;
  if (slash == std::string::npos) {
    c.prefix = max;
  } else {
    const std::string p = text.substr(slash + 1);
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    c.prefix = std::stoi(p);
    if (c.prefix > max) return false;
  }
  *out = c;
  return true;
}

bool FromSockaddr(const sockaddr* sa, IpAddr* out) {
  if (sa->sa_family == AF_INET) {
    out->v6 = false;
    out->b = {};
    std::memcpy(out->b.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    out->v6 = true;
    std::memcpy(out->b.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    return true;
  }
  return false;
}

std::string NonGlobalReason(const IpAddr& a) {
  if (!a.v6) {
    for (const auto& [c, why] : V4()) {
      if (c.Contains(a)) return why;
    }
    return "";
  }
  for (const auto& [c, why] : V6()) {
    if (c.Contains(a)) return why;
  }
  // 6to4 (2002::/16) embeds an IPv4 address in bits 16..47.
  if (a.b[0] == 0x20 && a.b[1] == 0x02) {
    IpAddr v4;
    std::memcpy(v4.b.data(), a.b.data() + 2, 4);
    std::string inner = NonGlobalReason(v4);
    if (!inner.empty()) return "6to4 embedding " + inner + " " + v4.ToString();
    return "";
  }
  // Only 2000::/3 is allocated global unicast.
  if ((a.b[0] & 0xe0) != 0x20) return "not global unicast (outside 2000::/3)";
  return "";
}

bool AddressAllowed(const IpAddr& a, const std::vector<Cidr>& allow, std::string* why) {
  for (const auto& c : allow) {
    if (c.Contains(a)) return true;
  }
  std::string reason = NonGlobalReason(a);
  if (reason.empty()) return true;
  if (why) *why = a.ToString() + " is " + reason;
  return false;
}

}  // namespace tollgate
