#include "core/url.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace tollgate {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsUnreserved(char c) { return IsAlpha(c) || IsDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'; }
bool IsSubDelim(char c) { return std::strchr("!$&'()*+,;=", c) != nullptr && c != '\0'; }
int HexVal(char c) { return IsDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10; }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
constexpr char kHex[] = "0123456789ABCDEF";

void PctEncode(unsigned char c, std::string* out) {
  out->push_back('%');
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 15]);
}

// §6.2.2.1-2 on one component: decode escapes of unreserved bytes, upper-case
// the rest, encode bytes the component may not hold. `extra` are the
// characters allowed besides pchar's (unreserved, sub-delims, ':' and '@').
bool NormPct(std::string_view in, const char* extra, std::string* out, std::string* why) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == '%') {
      if (i + 2 >= in.size() || !IsHex(in[i + 1]) || !IsHex(in[i + 2])) {
        *why = "a '%' not followed by two hex digits";
        return false;
      }
      const char d = static_cast<char>(HexVal(in[i + 1]) * 16 + HexVal(in[i + 2]));
      if (IsUnreserved(d)) {
        out->push_back(d);
      } else {
        PctEncode(static_cast<unsigned char>(d), out);
      }
      i += 2;
    } else if (u < 0x20 || u == 0x7f || c == '\\') {
      *why = "a control character or backslash in the URL";
      return false;
    } else if (IsUnreserved(c) || IsSubDelim(c) || c == ':' || c == '@' || std::strchr(extra, c) != nullptr) {
      out->push_back(c);
    } else {
      PctEncode(u, out);
    }
  }
  return true;
}

// §5.2.4.
std::string RemoveDotSegments(std::string_view in) {
  std::string out;
  while (!in.empty()) {
    if (in.substr(0, 3) == "../") {
      in.remove_prefix(3);
    } else if (in.substr(0, 2) == "./") {
      in.remove_prefix(2);
    } else if (in.substr(0, 3) == "/./") {
      in.remove_prefix(2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.substr(0, 4) == "/../" || in == "/..") {
      in = in.size() == 3 ? std::string_view("/") : in.substr(3);
      const auto slash = out.rfind('/');
      out.erase(slash == std::string::npos ? 0 : slash);
    } else if (in == "." || in == "..") {
      in = {};
    } else {
      size_t next = in.find('/', in[0] == '/' ? 1 : 0);
      if (next == std::string_view::npos) next = in.size();
      out.append(in.substr(0, next));
      in.remove_prefix(next);
    }
  }
  return out;
}

// RFC 3986 Appendix B split; the *_set flags say whether a part is defined.
struct Parts {
  std::string_view scheme, authority, path, query;
  bool has_scheme = false, has_authority = false, has_query = false;
};

bool Split(std::string_view s, Parts* p, std::string* why) {
  const size_t colon = s.find(':');
  const size_t stop = s.find_first_of("/?#");
  if (colon != std::string_view::npos && (stop == std::string_view::npos || colon < stop) && colon > 0) {
    std::string_view sch = s.substr(0, colon);
    bool ok = IsAlpha(sch[0]);
    for (char c : sch) ok = ok && (IsAlpha(c) || IsDigit(c) || c == '+' || c == '-' || c == '.');
    if (!ok) {
      *why = "not a valid URL scheme";
      return false;
    }
    p->scheme = sch;
    p->has_scheme = true;
    s.remove_prefix(colon + 1);
  }
  const size_t hash = s.find('#');
  if (hash != std::string_view::npos) s = s.substr(0, hash);
  if (s.substr(0, 2) == "//") {
    s.remove_prefix(2);
    const size_t end = s.find_first_of("/?");
    p->authority = s.substr(0, end);
    p->has_authority = true;
    s = end == std::string_view::npos ? std::string_view() : s.substr(end);
  }
  const size_t q = s.find('?');
  p->path = s.substr(0, q);
  if (q != std::string_view::npos) {
    p->query = s.substr(q + 1);
    p->has_query = true;
  }
  return true;
}

// Validates and normalises an authority into host and port.
bool Authority(std::string_view a, const std::string& scheme, Userinfo ui, NormalUrl* out, std::string* why) {
  const size_t at = a.rfind('@');
  if (at != std::string_view::npos) {
    if (ui == Userinfo::kRefuse) {
      *why = "URLs with userinfo (user:password@) are refused; send credentials in a header";
      return false;
    }
    a.remove_prefix(at + 1);
  }
  std::string_view host, port;
  bool has_port = false;
  if (!a.empty() && a[0] == '[') {
    const size_t close = a.find(']');
    if (close == std::string_view::npos) {
      *why = "an unterminated IPv6 literal";
      return false;
    }
    host = a.substr(1, close - 1);
    std::string_view rest = a.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') {
        *why = "junk after an IPv6 literal";
        return false;
      }
      port = rest.substr(1);
      has_port = true;
    }
    const std::string h(host);
    in6_addr a6{};
    if (h.find('%') != std::string::npos || inet_pton(AF_INET6, h.c_str(), &a6) != 1) {
      *why = "not a valid IPv6 literal (zone ids are not allowed)";
      return false;
    }
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &a6, buf, sizeof buf);
    out->host = std::string("[") + buf + "]";
  } else {
    const size_t c = a.find(':');
    host = a.substr(0, c);
    if (c != std::string_view::npos) {
      port = a.substr(c + 1);
      has_port = true;
    }
    if (host.empty()) {
      *why = "the URL has no host";
      return false;
    }
    std::string h;
    for (char ch : host) {
      if (!(IsAlpha(ch) || IsDigit(ch) || ch == '-' || ch == '.' || ch == '_')) {
        *why = "the host has characters outside [A-Za-z0-9.-_]";
        return false;
      }
      h.push_back(Lower(ch));
    }
    // A host that ends in a number is an IPv4 address in some form.
    const std::string_view last =
        std::string_view(h).substr(h.rfind('.') == std::string::npos ? 0 : h.rfind('.') + 1);
    bool numeric = !last.empty();
    if (last.size() > 2 && last[0] == '0' && last[1] == 'x') {
      for (char ch : last.substr(2)) numeric = numeric && IsHex(ch);
    } else {
      for (char ch : last) numeric = numeric && IsDigit(ch);
    }
    if (numeric) {
      in_addr a4{};
      if (inet_aton(h.c_str(), &a4) == 0) {
        *why = "the host looks numeric but is not a valid IPv4 address";
        return false;
      }
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &a4, buf, sizeof buf);
      h = buf;
    }
    out->host = h;
  }
  const std::string def = scheme == "https" ? "443" : "80";
  if (!has_port || port.empty()) {
    out->port = def;
    return true;
  }
  size_t i = 0;
  for (char ch : port) {
    if (!IsDigit(ch)) {
      *why = "the port is not a number";
      return false;
    }
  }
  while (i + 1 < port.size() && port[i] == '0') ++i;
  port.remove_prefix(i);
  if (port.size() > 5 || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
    *why = "the port is out of range";
    return false;
  }
  out->port = std::string(port);
  return true;
}

}  // namespace

bool NormalizeUrl(std::string_view ref, std::string_view base, NormalUrl* out, std::string* why,
                  Userinfo userinfo) {
  *out = NormalUrl();
  Parts r;
  if (!Split(ref, &r, why)) return false;
  std::string rpath, rquery;
  if (!NormPct(r.path, "/", &rpath, why) || !NormPct(r.query, "/?", &rquery, why)) return false;

  std::string authority, path, query;
  bool has_query = false;
  if (r.has_scheme) {
    for (char c : r.scheme) out->scheme.push_back(Lower(c));
    if (!r.has_authority) {
      *why = "the URL has no host";
      return false;
    }
    if (!Authority(r.authority, out->scheme, userinfo, out, why)) return false;
    path = RemoveDotSegments(rpath);
    query = rquery, has_query = r.has_query;
  } else {
    if (base.empty()) {
      *why = "a relative URL and no base_url to resolve it against";
      return false;
    }
    NormalUrl b;
    std::string bwhy;
    if (!NormalizeUrl(base, "", &b, &bwhy)) {
      *why = "base_url is not valid: " + bwhy;
      return false;
    }
    out->scheme = b.scheme;
    if (r.has_authority) {
      if (!Authority(r.authority, out->scheme, userinfo, out, why)) return false;
      path = RemoveDotSegments(rpath);
      query = rquery, has_query = r.has_query;
    } else {
      out->host = b.host;
      out->port = b.port;
      if (rpath.empty()) {
        path = b.path;
        has_query = r.has_query || !b.query.empty();
        query = r.has_query ? rquery : b.query;
      } else {
        if (rpath[0] == '/') {
          path = RemoveDotSegments(rpath);
        } else {
          // §5.2.3 merge: the base's path up to its last '/', then the ref.
          path = RemoveDotSegments(b.path.substr(0, b.path.rfind('/') + 1) + rpath);
        }
        query = rquery, has_query = r.has_query;
      }
    }
  }
  if (out->scheme != "http" && out->scheme != "https") {
    *why = "only http and https URLs are allowed";
    return false;
  }
  if (path.empty() || path[0] != '/') path = "/" + path;
  out->path = path;
  out->query = has_query ? query : "";
  const bool default_port = out->port == (out->scheme == "https" ? "443" : "80");
  out->full = out->scheme + "://" + out->host + (default_port ? "" : ":" + out->port) + out->path;
  if (!out->query.empty()) out->full += "?" + out->query;
  return true;
}

std::string AppendQuery(const std::string& url, const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string out = url;
  bool has_query = url.find('?') != std::string::npos;
  auto enc = [&](const std::string& s) {
    for (char c : s) {
      if (IsUnreserved(c)) {
        out.push_back(c);
      } else {
        PctEncode(static_cast<unsigned char>(c), &out);
      }
    }
  };
  for (const auto& [k, v] : kv) {
    out.push_back(has_query ? '&' : '?');
    has_query = true;
    enc(k);
    out.push_back('=');
    enc(v);
  }
  return out;
}

std::string NormalizePath(std::string_view p) {
  const bool abs = !p.empty() && p[0] == '/';
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view part = p.substr(i, j - i);
    if (part.empty() || part == ".") {
    } else if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out = abs ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k) out += '/';
    out += parts[k];
  }
  return out;
}

}  // namespace tollgate
