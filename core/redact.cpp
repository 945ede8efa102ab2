#include "core/redact.h"

#include <algorithm>
#include <cstring>

namespace tollgate {
namespace {

using Range = std::pair<size_t, size_t>;  // [begin, end) of a secret

// ASCII classes, inline (no locale: the scanner runs on every event).
bool LowerAscii(char c) { return c >= 'a' && c <= 'z'; }
bool UpperAscii(char c) { return c >= 'A' && c <= 'Z'; }
bool DigitAscii(char c) { return c >= '0' && c <= '9'; }
bool Letter(char c) { return LowerAscii(c) || UpperAscii(c); }
bool Alnum(char c) { return Letter(c) || DigitAscii(c); }
bool Word(char c) { return Alnum(c) || c == '_'; }
// Characters of base64/base64url tokens and most API keys.
bool TokenChar(char c) { return Alnum(c) || c == '-' || c == '_'; }
bool B64Char(char c) {
  return Alnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '=';
}
char Lower(char c) { return UpperAscii(c) ? static_cast<char>(c - 'A' + 'a') : c; }

std::string LowerStr(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), Lower);
  return out;
}

bool IStartsWith(std::string_view s, size_t at, std::string_view p) {
  if (at > s.size() || s.size() - at < p.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (Lower(s[at + i]) != p[i]) return false;
  }
  return true;
}

bool AlreadyRedacted(std::string_view s, size_t at) {
  return s.compare(at, std::strlen(kRedacted), kRedacted) == 0;
}

// A start of a token: not preceded by a word character.
bool Boundary(std::string_view s, size_t i) { return i == 0 || !Word(s[i - 1]); }
// A start of a command-line argument: the text's start, after blank space or an opening quote.
bool ArgStart(std::string_view s, size_t i) {
  return i == 0 || std::strchr(" \t\r\n'\"", s[i - 1]) != nullptr;
}

size_t Span(std::string_view s, size_t i, bool (*ok)(char)) {
  while (i < s.size() && ok(s[i])) ++i;
  return i;
}

bool AllOf(std::string_view s, bool (*ok)(char)) { return !s.empty() && std::all_of(s.begin(), s.end(), ok); }

int Hex(char c) {
  if (DigitAscii(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-escapes decoded, up to three times over ("p%2561ssword"): a name
// in a query string or a form body may be spelt that way.
std::string_view Unescape(std::string_view raw, std::string* buf) {
  for (int round = 0; round < 3 && raw.find('%') != std::string_view::npos; ++round) {
    std::string out;
    out.reserve(raw.size());
    bool changed = false;
    for (size_t i = 0; i < raw.size(); ++i) {
      const int h = raw[i] == '%' && i + 2 < raw.size() ? Hex(raw[i + 1]) : -1;
      const int l = h >= 0 ? Hex(raw[i + 2]) : -1;
      if (l >= 0) {
        out += static_cast<char>(h * 16 + l);
        i += 2;
        changed = true;
      } else {
        out += raw[i];
      }
    }
    if (!changed) break;
    *buf = std::move(out);
    raw = *buf;
  }
  return raw;
}

// A name as it is matched: percent-escapes decoded, leading dashes dropped,
// lower case, the separators - _ . and space removed ("PrivateKey",
// "private_key" and "PRIVATE-KEY" all read "privatekey"). *last: where its
// last word starts, after a separator or at a camelCase hump ("dbPwd": 2).
std::string Fold(std::string_view raw, size_t* last) {
  std::string buf;
  raw = Unescape(raw, &buf);
  while (!raw.empty() && raw.front() == '-') raw.remove_prefix(1);
  std::string f;
  f.reserve(raw.size());
  *last = 0;
  bool sep = false;
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '-' || c == '_' || c == '.' || c == ' ') {
      sep = true;
      continue;
    }
    const char prev = i > 0 ? raw[i - 1] : '\0';
    const bool hump = UpperAscii(c) && (LowerAscii(prev) || DigitAscii(prev) ||
                                        (UpperAscii(prev) && i + 1 < raw.size() && LowerAscii(raw[i + 1])));
    if ((sep || hump) && !f.empty()) *last = f.size();
    sep = false;
    f += Lower(c);
  }
  return f;
}

bool EndsWith(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Vendor tokens: a prefix and a minimum body of token characters.
struct Prefixed {
  std::string_view prefix;
  size_t min_body;
  bool (*body)(char);
};
bool UpperDigit(char c) { return UpperAscii(c) || DigitAscii(c); }
bool GithubPatChar(char c) { return Alnum(c) || c == '_'; }
const Prefixed kPrefixed[] = {
    {"sk-", 20, TokenChar},  // OpenAI-style: sk-..., sk-live-..., sk-proj-...
    {"sk_live_", 10, TokenChar}, {"sk_test_", 10, TokenChar},  // Stripe
    {"rk_live_", 10, TokenChar}, {"rk_test_", 10, TokenChar},
    {"ghp_", 20, Alnum},         {"gho_", 20, Alnum},  // GitHub
    {"ghs_", 20, Alnum},         {"ghu_", 20, Alnum},
    {"ghr_", 20, Alnum},         {"github_pat_", 20, GithubPatChar},
    {"xoxa-", 10, TokenChar},    {"xoxb-", 10, TokenChar},  // Slack
    {"xoxp-", 10, TokenChar},    {"xoxo-", 10, TokenChar},
    {"xoxs-", 10, TokenChar},    {"xoxr-", 10, TokenChar},
    {"AIza", 30, TokenChar},    // Google API keys
    {"glpat-", 20, TokenChar},  // GitLab
    {"npm_", 30, Alnum},        // npm
    {"hf_", 30, Alnum},         // Hugging Face
};
// AWS access key ids: exactly 16 more upper-case letters or digits.
const char* const kAwsPrefixes[] = {"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"};

void ScanPrefixed(std::string_view s, std::vector<Range>* out) {
  // A JWT candidate that failed failed for its whole run of token
  // characters (every later start in it ends where it ended): not retried,
  // so "eyJ-eyJ-eyJ-..." stays linear.
  size_t jwt_failed_until = 0;
  for (size_t i = 0; i + 4 <= s.size(); ++i) {
    if (!Boundary(s, i)) continue;
    const char c = s[i];
    if (c != 's' && c != 'r' && c != 'g' && c != 'x' && c != 'A' && c != 'n' && c != 'e' && c != 'h')
      continue;
    if (c == 'A') {
      bool aws = false;
      for (const char* p : kAwsPrefixes) {
        if (s.compare(i, 4, p) != 0) continue;
        const size_t e = Span(s, i + 4, UpperDigit);
        if (e - i == 20 && (e == s.size() || !Word(s[e]))) {
          out->push_back({i, e});
          i = e - 1;
          aws = true;
        }
        break;
      }
      if (aws) continue;
    }
    if (c == 'e' && i >= jwt_failed_until &&
        s.compare(i, 3, "eyJ") == 0) {  // a JWT: three base64url segments
      size_t e1 = Span(s, i, TokenChar);
      jwt_failed_until = e1;
      if (e1 - i >= 10 && e1 < s.size() && s[e1] == '.') {
        size_t e2 = Span(s, e1 + 1, TokenChar);
        if (e2 - e1 > 4 && e2 < s.size() && s[e2] == '.') {
          size_t e3 = Span(s, e2 + 1, TokenChar);
          out->push_back({i, e3});
          i = e3 - 1;
          continue;
        }
      }
    }
    for (const auto& p : kPrefixed) {
      const size_t n = p.prefix.size();
      if (p.prefix[0] != c || s.compare(i, n, p.prefix) != 0) continue;
      const size_t e = Span(s, i + n, p.body);
      if (e - i - n >= p.min_body) {
        out->push_back({i, e});
        i = e - 1;
      }
      break;
    }
  }
}

// "Bearer TOKEN", "Basic B64", "token TOKEN" (HTTP Authorization schemes).
void ScanAuthSchemes(std::string_view s, std::vector<Range>* out) {
  static const char* const kSchemes[] = {"bearer ", "basic ", "token ", "digest "};
  for (size_t i = 0; i + 7 < s.size(); ++i) {
    if (!Boundary(s, i)) continue;
    const char c = Lower(s[i]);
    if (c != 'b' && c != 't' && c != 'd') continue;
    for (const char* sc : kSchemes) {
      const size_t n = std::strlen(sc);
      if (!IStartsWith(s, i, sc)) continue;
      size_t b = i + n;
      while (b < s.size() && s[b] == ' ') ++b;
      if (b < s.size() && AlreadyRedacted(s, b)) break;
      const size_t e = Span(s, b, B64Char);
      // Long enough to be a credential, and not an ordinary word ("basic
      // internationalization": lower-case letters only).
      const std::string_view cred = s.substr(b, e - b);
      const bool digit = std::any_of(cred.begin(), cred.end(), DigitAscii);
      if ((cred.size() >= 16 && !AllOf(cred, LowerAscii)) || (cred.size() >= 8 && digit)) {
        out->push_back({b, e});
        i = e;
      }
      break;
    }
  }
}

// PEM private key blocks, BEGIN line to END line (or the end of the text).
void ScanPem(std::string_view s, std::vector<Range>* out) {
  size_t from = 0;
  while (true) {
    const size_t b = s.find("-----BEGIN ", from);
    if (b == std::string_view::npos) return;
    const size_t head_end = s.find("-----", b + 11);
    if (head_end == std::string_view::npos) return;
    if (s.substr(b, head_end - b).find("PRIVATE KEY") == std::string_view::npos) {
      from = head_end + 5;
      continue;
    }
    size_t e = s.find("-----END ", head_end + 5);
    if (e == std::string_view::npos) {
      e = s.size();
    } else {
      const size_t close = s.find("-----", e + 9);
      e = close == std::string_view::npos ? s.size() : close + 5;
    }
    out->push_back({b, e});
    from = e;
  }
}

// A user name alone ("ssh://git@host", "postgres://app@db"): not a
// credential. A token used as the user name has digits or capitals.
bool PlainUser(std::string_view u) {
  return u.size() <= 32 && std::all_of(u.begin(), u.end(), [](char c) {
           return LowerAscii(c) || c == '.' || c == '-' || c == '_';
         });
}

// scheme://USERINFO@host: the userinfo.
void ScanUserinfo(std::string_view s, std::vector<Range>* out) {
  size_t from = 0;
  while (true) {
    const size_t p = s.find("://", from);
    if (p == std::string_view::npos) return;
    const size_t b = p + 3;
    size_t j = b;
    while (j < s.size() && !std::strchr("/?#@ \t\r\n\"'<>\\", s[j])) ++j;
    if (j < s.size() && s[j] == '@' && j > b && !AlreadyRedacted(s, b) && !PlainUser(s.substr(b, j - b))) {
      out->push_back({b, j});
    }
    from = b;
  }
}

// Names whose value is a secret in NAME=VALUE, NAME: VALUE, ?NAME=VALUE,
// --NAME=VALUE and --NAME VALUE, compared folded (Fold): exact names, then
// suffixes (so "access_token", "db_password" and "AccountKey" match,
// "tokens_used" does not), then short words that must be the whole last
// word ("db_pass", "MYSQL_PWD"; not "bypass" or "compass").
const char* const kSecretNames[] = {
    "sig",  "signature",    "key",           "pass",           "pwd",
    "auth", "codeverifier", "xamzsignature", "xgoogsignature", "sharedaccesssignature"};
const char* const kSecretSuffixes[] = {"password",      "passwd",          "passphrase",   "secret",
                                       "token",         "apikey",          "accesskey",    "accountkey",
                                       "privatekey",    "sessionkey",      "masterkey",    "signingkey",
                                       "encryptionkey", "subscriptionkey", "functionskey", "credential",
                                       "credentials",   "authorization",   "cookie"};
const char* const kSecretLastWords[] = {"pass", "pwd"};
constexpr size_t kMaxName = 64;

bool SecretName(std::string_view raw) {
  if (raw.empty() || raw.size() > 3 * kMaxName) return false;
  size_t last = 0;
  const std::string name = Fold(raw, &last);
  if (name.empty() || name.size() > kMaxName) return false;
  for (const char* n : kSecretNames) {
    if (name == n) return true;
  }
  for (const char* suf : kSecretSuffixes) {
    if (EndsWith(name, suf)) return true;
  }
  const std::string_view word = std::string_view(name).substr(last);
  for (const char* w : kSecretLastWords) {
    if (word == w) return true;
  }
  return false;
}

bool NameChar(char c) { return Word(c) || c == '-' || c == '.' || c == '%'; }

// Whether s[i-3, i) is the percent-escape of a character that ends a name
// ("%3F" in "https%3A%2F%2Fh%2Fx%3Ftoken%3DVALUE").
bool EscapedDelimiter(std::string_view s, size_t i) {
  if (i < 3 || s[i - 3] != '%') return false;
  const int h = Hex(s[i - 2]), l = Hex(s[i - 1]);
  const char c = static_cast<char>(h * 16 + l);
  return h >= 0 && l >= 0 && c != '\0' && std::strchr("?&/:=#;, \"'", c) != nullptr;
}

// The value starting at `b`: inside its quotes when quoted, else up to a
// delimiter (the line's end for Authorization/Cookie headers). `escaped`:
// in a percent-encoded text (NAME%3DVALUE), where %20, %23 and %26 end it too.
Range ValueAt(std::string_view s, size_t b, bool to_line_end, bool escaped = false) {
  if (b < s.size() && (s[b] == '"' || s[b] == '\'')) {
    size_t q = b + 1;
    while (q < s.size() && s[q] != s[b]) q += s[q] == '\\' ? 2 : 1;
    return {b + 1, std::min(q, s.size())};
  }
  size_t e = b;
  if (to_line_end) {
    while (e < s.size() && s[e] != '\n' && s[e] != '\r' && s[e] != '"') ++e;
    while (e > b && s[e - 1] == ' ') --e;
    return {b, e};
  }
  while (e < s.size() && !std::strchr("&# \t\r\n,;\"'<>(){}[]\\", s[e])) {
    if (escaped && s[e] == '%' && e + 2 < s.size() && s[e + 1] == '2' &&
        (s[e + 2] == '0' || s[e + 2] == '3' || s[e + 2] == '6'))
      break;
    ++e;
  }
  return {b, e};
}

// Words that say a secret is absent: "token: none", "password: missing".
const char* const kNoSecret[] = {"none",     "null",  "nil",   "missing",   "invalid", "expired",
                                 "required", "empty", "unset", "undefined", "true",    "false"};

// Whether the unquoted value [b, e) after "NAME:" is prose rather than a
// secret: one ordinary word ("No", "denied": letters, lower case after the
// first) that a sentence goes on from ("admin.token: No such file or
// directory", "password: must be 8 characters"), or a word of kNoSecret.
bool Prose(std::string_view s, size_t b, size_t e) {
  if (e <= b || e - b > 24 || !Letter(s[b]) || !std::all_of(s.begin() + b + 1, s.begin() + e, LowerAscii))
    return false;
  if (e + 1 < s.size() && s[e] == ' ' && Letter(s[e + 1])) return true;
  const std::string w = LowerStr(s.substr(b, e - b));
  return std::any_of(std::begin(kNoSecret), std::end(kNoSecret), [&](const char* n) { return w == n; });
}

void ScanPairs(std::string_view s, std::vector<Range>* out) {
  for (size_t p = 0; p < s.size(); ++p) {
    char c = s[p];
    size_t after = p + 1;  // the value's earliest start
    bool escaped = false;
    if (c == '%') {  // NAME%3DVALUE: a pair inside a percent-encoded URL
      if (p + 2 >= s.size() || s[p + 1] != '3' || (s[p + 2] != 'D' && s[p + 2] != 'd')) continue;
      c = '=';
      after = p + 3;
      escaped = true;
    } else if (c != '=' && c != ':' && c != ' ') {
      continue;
    }
    size_t ne = p;
    if (c != ' ') {
      while (ne > 0 && s[ne - 1] == ' ') --ne;  // "name" : value
    }
    size_t nb = ne;
    bool quoted = false;
    if (c != ' ' && nb > 0 && (s[nb - 1] == '"' || s[nb - 1] == '\'')) {  // JSON: "password": "x"
      const char q = s[nb - 1];
      const size_t open = s.rfind(q, nb - 2 < s.size() ? nb - 2 : 0);
      if (nb < 2 || open == std::string_view::npos || nb - 1 - open > 64) continue;
      quoted = true;
      nb = open + 1;
      ne = ne - 1;
    } else {
      while (nb > 0 && NameChar(s[nb - 1]) && !EscapedDelimiter(s, nb)) --nb;
    }
    if (nb >= ne) continue;
    const std::string_view name = s.substr(nb, ne - nb);
    // "--api-key VALUE": only a flag name is followed by its value after a space.
    if (c == ' ' && name.front() != '-') continue;
    if (!SecretName(name)) continue;
    if (c == ':' && !quoted && name == "PASS") continue;  // a test runner's "PASS: test_login"
    size_t b = after;
    if (c == ':' && !quoted && b < s.size() && s[b] == '/') continue;  // a URL's scheme, not a pair
    if (c != ' ') {
      while (b < s.size() && s[b] == ' ') ++b;
    }
    if (b >= s.size() || AlreadyRedacted(s, b) || (b + 1 < s.size() && AlreadyRedacted(s, b + 1))) continue;
    const std::string lname = LowerStr(name);
    // (A passphrase has spaces; a header's value runs to the end of its line.)
    const bool whole_line =
        c == ':' && !quoted &&
        (lname.find("authorization") != std::string::npos || lname.find("cookie") != std::string::npos ||
         lname.find("passphrase") != std::string::npos);
    const Range v = ValueAt(s, b, whole_line, escaped);
    // "admin.token: No such file": the name of a file, then an error.
    if (c == ':' && !quoted && !whole_line && s[b] != '"' && s[b] != '\'' && Prose(s, v.first, v.second))
      continue;
    if (v.second > v.first) {
      out->push_back(v);
      p = std::max(p, v.second - 1);
    }
  }
}

// USER:PASSWORD after curl's -u/--user (-U/--proxy-user): the password.
// "1000:1000" (docker -u uid:gid) is not one.
bool UserPassword(std::string_view s, size_t b, size_t e, Range* pw) {
  const size_t colon = s.substr(b, e - b).find(':');
  if (colon == std::string_view::npos) return false;
  const size_t p = b + colon + 1;
  if (p >= e || AlreadyRedacted(s, p)) return false;
  if (AllOf(s.substr(b, colon), DigitAscii) && AllOf(s.substr(p, e - p), DigitAscii)) return false;
  *pw = {p, e};
  return true;
}

// The user flags, spelt "-u X", "-uX", "--user X", "--user=X"; the length
// of the flag at `i` with what separates it from its value, or 0.
size_t UserFlag(std::string_view s, size_t i) {
  if (!ArgStart(s, i) || i + 2 >= s.size()) return 0;
  if (s[i + 1] == 'u' || s[i + 1] == 'U') {
    size_t b = i + 2;
    while (b < s.size() && s[b] == ' ') ++b;
    return b - i;
  }
  for (const char* f : {"--user", "--proxy-user"}) {
    const size_t n = std::strlen(f);
    if (s.compare(i, n, f) != 0 || i + n >= s.size()) continue;
    if (s[i + n] == '=') return n + 1;
    if (s[i + n] != ' ') return 0;  // --user-agent
    size_t b = i + n;
    while (b < s.size() && s[b] == ' ') ++b;
    return b - i;
  }
  return 0;
}

void ScanUserFlags(std::string_view s, std::vector<Range>* out) {
  for (size_t i = s.find('-'); i != std::string_view::npos; i = s.find('-', i + 1)) {
    const size_t n = UserFlag(s, i);
    if (n == 0) continue;
    const Range v = ValueAt(s, i + n, false);
    Range pw;
    if (UserPassword(s, v.first, v.second, &pw)) {
      out->push_back(pw);
      i = pw.second - 1;
    }
  }
}

// Whether `v` names the mysql or mariadb client (mysql, /usr/bin/mysqldump,
// mariadb-dump), whose -pPASSWORD carries the password in the argument.
bool MysqlProgram(std::string_view v) {
  if (v.size() > 128) return false;
  const size_t slash = v.rfind('/');
  if (slash != std::string_view::npos) v.remove_prefix(slash + 1);
  return v.compare(0, 5, "mysql") == 0 || v.compare(0, 7, "mariadb") == 0;
}

// "-pPASSWORD" after a mysql or mariadb command ("-p PASSWORD" would prompt,
// and name a database).
void ScanMysql(std::string_view s, std::vector<Range>* out) {
  size_t m = std::string_view::npos;
  for (const char* prog : {"mysql", "mariadb"}) {
    for (size_t at = s.find(prog); at != std::string_view::npos; at = s.find(prog, at + 1)) {
      if (Boundary(s, at)) {
        m = std::min(m, at);
        break;
      }
    }
  }
  if (m == std::string_view::npos) return;
  for (size_t i = s.find("-p", m); i != std::string_view::npos; i = s.find("-p", i + 2)) {
    if (!ArgStart(s, i) || i + 2 >= s.size() || std::strchr(" \t\r\n-", s[i + 2]) ||
        AlreadyRedacted(s, i + 2))
      continue;
    const Range v = ValueAt(s, i + 2, false);
    if (v.second > v.first) out->push_back(v);
  }
}

std::string PointerToken(const std::string& key) {
  std::string escaped;  // JSON pointer: ~ -> ~0, / -> ~1
  for (char c : key) escaped += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return escaped;
}

// Whether `s` is a flag whose next argument is a secret ("--password", "-p"
// is not: too ambiguous).
bool SecretFlag(const std::string& s) {
  return s.size() > 2 && s[0] == '-' && s.find_first_of("= ") == std::string::npos && SecretName(s);
}

bool UserFlagArg(const std::string& s) {
  return s == "-u" || s == "-U" || s == "--user" || s == "--proxy-user";
}

// Redacts `value` at `path`; `mysql`: an argument list of the mysql client
// (its "-pPASSWORD" elements are secrets).
void Walk(const Redactor& r, Json& value, const std::string& path, bool mysql,
          std::vector<std::string>* out) {
  auto replace = [&](Json& v, const std::string& at, std::string with) {
    if (v != with) {
      v = std::move(with);
      out->push_back(at);
    }
  };
  if (value.is_object()) {
    // {"command": "mysql", "args": [...]}: the arguments are mysql's.
    for (const auto& [key, child] : value.items()) {
      mysql = mysql || (child.is_string() && MysqlProgram(child.get_ref<const std::string&>()));
    }
    for (auto& [key, child] : value.items()) {
      const std::string child_path = path + "/" + PointerToken(key);
      if (r.SecretKey(key)) {
        replace(child, child_path, kRedacted);
      } else {
        Walk(r, child, child_path, mysql, out);
      }
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string child_path = path + "/" + std::to_string(i);
      Json& v = value[i];
      if (v.is_string()) {
        const std::string& str = v.get_ref<const std::string&>();
        const std::string* prev =
            i > 0 && value[i - 1].is_string() ? &value[i - 1].get_ref<const std::string&>() : nullptr;
        // ["--password", "VALUE"]: the element after a secret flag.
        if (prev != nullptr && SecretFlag(*prev)) {
          replace(v, child_path, kRedacted);
          continue;
        }
        Range pw;  // ["-u", "USER:PASSWORD"]
        if (prev != nullptr && UserFlagArg(*prev) && UserPassword(str, 0, str.size(), &pw)) {
          replace(v, child_path, str.substr(0, pw.first) + kRedacted);
          continue;
        }
        if (mysql && str.size() > 2 && str.compare(0, 2, "-p") == 0 && !AlreadyRedacted(str, 2)) {
          replace(v, child_path, "-p" + std::string(kRedacted));
          continue;
        }
        mysql = mysql || MysqlProgram(str);
      }
      Walk(r, v, child_path, mysql, out);
    }
  } else if (value.is_string()) {
    if (r.RedactString(&value.get_ref<std::string&>())) out->push_back(path);
  }
}

}  // namespace

const std::vector<std::string>& DefaultSecretKeyPatterns() {
  static const std::vector<std::string> kPatterns = {
      "authorization", "password",  "passwd",     "passphrase",    "secret",          "token",
      "apikey",        "cookie",    "privatekey", "credential",    "sessionkey",      "accesskey",
      "accountkey",    "masterkey", "signingkey", "encryptionkey", "subscriptionkey", "functionskey"};
  return kPatterns;
}

const std::vector<std::string>& BuiltinTokenPrefixes() {
  static const std::vector<std::string> kAll = [] {
    std::vector<std::string> v;
    for (const auto& p : kPrefixed) v.emplace_back(p.prefix);
    for (const char* p : kAwsPrefixes) v.push_back(p);
    return v;
  }();
  return kAll;
}

Redactor::Redactor() : keys_(DefaultSecretKeyPatterns()) {}

Redactor::Redactor(std::vector<std::string> keys) : builtin_words_(false) {
  for (const auto& k : keys) AddKey(k);
}

void Redactor::AddKey(std::string_view fragment) {
  size_t last = 0;
  std::string f = Fold(fragment, &last);
  if (!f.empty()) keys_.push_back(std::move(f));  // (an empty fragment would match every key)
}

std::shared_ptr<const Redactor> DefaultRedactor() {
  static const std::shared_ptr<const Redactor> kDefault = std::make_shared<Redactor>();
  return kDefault;
}

Status Redactor::FromPolicy(const Json& doc, std::shared_ptr<const Redactor>* out) {
  auto bad = [](const std::string& why) { return Status::Error("E_POLICY_INVALID", "/redact: " + why); };
  if (!doc.is_object() || !doc.contains("redact") || doc["redact"].is_null()) {
    *out = DefaultRedactor();
    return Status::Ok();
  }
  const Json& sec = doc["redact"];
  if (!sec.is_object()) return bad("must be a map with keys and values");
  auto r = std::make_shared<Redactor>();
  for (const auto& [k, v] : sec.items()) {
    if (k != "keys" && k != "values") return bad("unknown key '" + k + "' (keys, values)");
    if (!v.is_array()) return bad(k + " must be a list of strings");
    for (const auto& x : v) {
      if (!x.is_string() || x.get_ref<const std::string&>().empty())
        return bad(k + " must be a list of non-empty strings");
      const std::string& str = x.get_ref<const std::string&>();
      if (k == "keys") {
        r->AddKey(str);
        continue;
      }
      try {
        r->values_.emplace_back(str, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        return bad("values: '" + str + "' is not a valid regex: " + e.what());
      }
      if (std::regex_search("", r->values_.back()))
        return bad("values: '" + str + "' matches the empty string");
    }
  }
  *out = std::move(r);
  return Status::Ok();
}

bool Redactor::SecretKey(std::string_view key) const {
  size_t last = 0;
  const std::string f = Fold(key, &last);
  for (const auto& k : keys_) {
    if (f.find(k) != std::string::npos) return true;
  }
  if (!builtin_words_) return false;
  const std::string_view word = std::string_view(f).substr(last);
  for (const char* w : kSecretLastWords) {
    if (word == w) return true;
  }
  return IStartsWith(key, 0, "x-auth") || IStartsWith(key, 0, "x_auth");  // X-Auth-Key, X-Auth-Email
}

bool Redactor::RedactString(std::string* s) const {
  if (s->size() < 6 && values_.empty()) return false;  // "pwd=xy" is the shortest we know
  std::vector<Range> r;
  const std::string_view v(*s);
  ScanPrefixed(v, &r);
  ScanAuthSchemes(v, &r);
  if (v.find("-----BEGIN ") != std::string_view::npos) ScanPem(v, &r);
  if (v.find("://") != std::string_view::npos) ScanUserinfo(v, &r);
  ScanPairs(v, &r);
  ScanUserFlags(v, &r);
  if (v.find("mysql") != std::string_view::npos || v.find("mariadb") != std::string_view::npos)
    ScanMysql(v, &r);
  // The policy's regexes run over windows of kWindow bytes overlapping by
  // kOverlap: libstdc++'s matcher recurses per character, and an agent's
  // megabyte-long string must not overflow the stack. A match longer than
  // the overlap that straddles two windows can be missed (docs/redaction.md).
  constexpr size_t kWindow = 2 << 10, kOverlap = 256;
  for (const auto& re : values_) {
    for (size_t w = 0; w < v.size(); w += kWindow - kOverlap) {
      const char* base = s->data() + w;
      const size_t len = std::min(kWindow, v.size() - w);
      try {
        for (auto it = std::cregex_iterator(base, base + len, re); it != std::cregex_iterator(); ++it) {
          const auto& m = *it;
          const size_t g = m.size() > 1 && m[1].matched ? 1 : 0;
          const size_t b = w + static_cast<size_t>(m.position(g));
          if (m.length(g) > 0 && !AlreadyRedacted(v, b))
            r.push_back({b, b + static_cast<size_t>(m.length(g))});
        }
      } catch (const std::exception&) {
        r.push_back({w, w + len});  // the matcher gave up (complexity): fail closed, hide the window
      }
      if (w + len >= v.size()) break;
    }
  }
  if (r.empty()) return false;
  std::sort(r.begin(), r.end());
  std::string out;
  out.reserve(s->size());
  size_t at = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    size_t b = r[i].first, e = r[i].second;
    if (b < at) b = at;  // overlaps the previous one
    if (e <= b) continue;
    out.append(*s, at, b - at);
    out += kRedacted;
    at = e;
  }
  out.append(*s, at, std::string::npos);
  if (out == *s) return false;
  *s = std::move(out);
  return true;
}

std::vector<std::string> Redactor::Redact(Json& value, const std::string& path) const {
  std::vector<std::string> out;
  Walk(*this, value, path, false, &out);
  return out;
}

std::vector<std::string> RedactSecrets(Json& value, const std::vector<std::string>& patterns,
                                       const std::string& path) {
  if (&patterns == &DefaultSecretKeyPatterns() || patterns == DefaultSecretKeyPatterns()) {
    return DefaultRedactor()->Redact(value, path);
  }
  // Callers with their own key list: those keys, the built-in value scanner.
  return Redactor(patterns).Redact(value, path);
}

std::vector<std::string> RedactDecision(Json& decision, const Redactor& r) {
  std::vector<std::string> out;
  if (!decision.is_object()) return out;
  for (const char* k : {"invocation", "subject", "reason"}) {
    auto it = decision.find(k);
    if (it != decision.end() && it->is_string() && r.RedactString(&it->get_ref<std::string&>())) {
      out.push_back(std::string("/") + k);
    }
  }
  auto checks = decision.find("checks");
  if (checks != decision.end() && checks->is_array()) {
    for (size_t i = 0; i < checks->size(); ++i) {
      Json& c = (*checks)[i];
      if (!c.is_object()) continue;
      auto d = c.find("detail");
      if (d != c.end() && d->is_string() && r.RedactString(&d->get_ref<std::string&>())) {
        out.push_back("/checks/" + std::to_string(i) + "/detail");
      }
    }
  }
  return out;
}

std::shared_ptr<const Redactor> RedactorInForce::get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return r_;
}

void RedactorInForce::set(std::shared_ptr<const Redactor> r) {
  std::lock_guard<std::mutex> lock(mu_);
  r_ = r ? std::move(r) : DefaultRedactor();
}

void RedactorInForce::OnAppended(const std::vector<Event>& events) {
  for (const Event& e : events) {
    if (e.type != ev::kPolicyUpdated || !e.data.is_object() || e.data.value("tier", "file") != "file")
      continue;
    std::shared_ptr<const Redactor> r;
    if (Redactor::FromPolicy(e.data.value("policy", Json::object()), &r).ok()) set(std::move(r));
  }
}

}  // namespace tollgate
