// URL and path normalisation shared by decide and execute, so that what a
// policy glob is matched against is byte for byte what execute fetches or
// opens (docs/policy.md, "How URLs and paths are normalised").
//
// NormalizeUrl(ref, base) contract:
// - `ref` is resolved against `base` per RFC 3986 §5.2 ("./x", "../x", "/x",
//   "//host/x", "?q"; a fragment is dropped). `base` may be empty; it must
//   then be absolute. A ref with its own scheme ignores the base.
// - Percent-encoding (§6.2.2): escapes of unreserved characters
//   (A-Z a-z 0-9 - . _ ~) are decoded, all other escapes upper-cased and kept
//   (so %2F stays an encoded byte, never a path separator); a '%' not
//   followed by two hex digits, a control byte or a backslash is refused;
//   other bytes outside the RFC's set (space, non-ASCII, '"', ...) are
//   percent-encoded. Decoding happens before dot-segment removal, so "%2e%2e"
//   is "..".
// - Dot segments are removed (§5.2.4); an empty path becomes "/".
// - Scheme and host are lower-cased; only http and https are valid results.
//   A numeric IPv4 host in any form inet_aton accepts (127.1, 0x7f000001,
//   2130706433) becomes a dotted quad; other hosts are [a-z0-9.-_] names
//   or [IPv6] literals (no zone ids).
// - The port is dropped when it is the scheme's default (http 80, https
//   443), written without leading zeros otherwise; 1..65535.
// - Userinfo ("user:pw@host") is refused with kRefuse (decide and the first
//   hop: credentials belong in headers, which are redacted when logged), and
//   dropped with kDrop (a redirect's Location).
// Pure, no I/O, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate {

struct NormalUrl {
  std::string full;    // scheme://host[:port]path[?query]
  std::string scheme;  // "http" | "https"
  std::string host;    // lower-case; IPv6 with brackets
  std::string port;    // the effective port, always set ("80" when default)
  std::string path;    // starts with '/'
  std::string query;   // without '?'; empty when none
};

enum class Userinfo { kRefuse, kDrop };

// False with *why (for a person) when the result is not a valid http(s) URL.
bool NormalizeUrl(std::string_view ref, std::string_view base, NormalUrl* out, std::string* why,
                  Userinfo userinfo = Userinfo::kRefuse);

// `url` (normalised) with key=value pairs appended to its query, each key and
// value percent-encoded (everything but unreserved bytes).
std::string AppendQuery(const std::string& url, const std::vector<std::pair<std::string, std::string>>& kv);

// Lexical normalisation of a file tool's path: "." and empty segments
// dropped, ".." pops (kept when nothing is left to pop, so "/a/../../etc"
// never looks like it is under "/"). Used for decide's subject and
// file_prefix rules and by execute's recomputation of it.
std::string NormalizePath(std::string_view p);

}  // namespace tollgate
