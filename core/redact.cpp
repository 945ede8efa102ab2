#include "core/redact.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace tollgate {
namespace {

using Range = std::pair<size_t, size_t>;  // [begin, end) of a secret

bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool Word(char c) { return Alnum(c) || c == '_'; }
// Characters of base64/base64url tokens and most API keys.
bool TokenChar(char c) { return Alnum(c) || c == '-' || c == '_'; }
bool B64Char(char c) { return Alnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '='; }
char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string LowerStr(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), Lower);
  return out;
}

bool IStartsWith(std::string_view s, size_t at, std::string_view p) {
  if (s.size() - at < p.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (Lower(s[at + i]) != p[i]) return false;
  }
  return true;
}

bool AlreadyRedacted(std::string_view s, size_t at) { return s.compare(at, std::strlen(kRedacted), kRedacted) == 0; }

// A start of a token: not preceded by a word character.
bool Boundary(std::string_view s, size_t i) { return i == 0 || !Word(s[i - 1]); }

size_t Span(std::string_view s, size_t i, bool (*ok)(char)) {
  while (i < s.size() && ok(s[i])) ++i;
  return i;
}

// Vendor tokens: a prefix and a minimum body of token characters.
struct Prefixed {
  const char* prefix;
  size_t min_body;
  bool (*body)(char);
};
bool UpperDigit(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool GithubPatChar(char c) { return Alnum(c) || c == '_'; }
const Prefixed kPrefixed[] = {
    {"sk-", 20, TokenChar},           // OpenAI-style: sk-..., sk-live-..., sk-proj-...
    {"sk_live_", 10, TokenChar},      {"sk_test_", 10, TokenChar},  // Stripe
    {"rk_live_", 10, TokenChar},      {"rk_test_", 10, TokenChar},
    {"ghp_", 20, Alnum},              {"gho_", 20, Alnum},  // GitHub
    {"ghs_", 20, Alnum},              {"ghu_", 20, Alnum},          {"ghr_", 20, Alnum},
    {"github_pat_", 20, GithubPatChar},
    {"xoxa-", 10, TokenChar},         {"xoxb-", 10, TokenChar},  // Slack
    {"xoxp-", 10, TokenChar},         {"xoxo-", 10, TokenChar},
    {"xoxs-", 10, TokenChar},         {"xoxr-", 10, TokenChar},
    {"AIza", 30, TokenChar},          // Google API keys
    {"glpat-", 20, TokenChar},        // GitLab
    {"npm_", 30, Alnum},              // npm
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
    if (c != 's' && c != 'r' && c != 'g' && c != 'x' && c != 'A' && c != 'n' && c != 'e') continue;
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
    if (c == 'e' && i >= jwt_failed_until && s.compare(i, 3, "eyJ") == 0) {  // a JWT: three base64url segments
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
      const size_t n = std::strlen(p.prefix);
      if (s.compare(i, n, p.prefix) != 0) continue;
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
      // Long enough to be a credential, and not an ordinary word.
      const bool digit = std::any_of(s.begin() + b, s.begin() + e, [](char x) { return std::isdigit(static_cast<unsigned char>(x)); });
      if (e - b >= 16 || (e - b >= 8 && digit)) {
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

// scheme://USERINFO@host: the userinfo.
void ScanUserinfo(std::string_view s, std::vector<Range>* out) {
  size_t from = 0;
  while (true) {
    const size_t p = s.find("://", from);
    if (p == std::string_view::npos) return;
    const size_t b = p + 3;
    size_t j = b;
    while (j < s.size() && !std::strchr("/?#@ \t\r\n\"'<>\\", s[j])) ++j;
    if (j < s.size() && s[j] == '@' && j > b && !AlreadyRedacted(s, b)) out->push_back({b, j});
    from = b;
  }
}

// Names whose value is a secret in NAME=VALUE, NAME: VALUE, ?NAME=VALUE,
// --NAME=VALUE and --NAME VALUE. Exact names, then suffixes (so
// "access_token" and "db_password" match, "tokens_used" does not).
const char* const kSecretNames[] = {"sig", "signature", "key", "pass", "pwd", "auth", "code_verifier", "x-amz-signature",
                                    "x-amz-security-token", "x-goog-signature"};
const char* const kSecretSuffixes[] = {"password",   "passwd",      "passphrase", "secret",      "token",
                                       "apikey",     "api_key",     "api-key",    "access_key",  "access-key",
                                       "private_key", "private-key", "credential", "credentials", "authorization",
                                       "cookie",     "session_key", "client_secret", "auth_token", "auth-token"};

bool SecretName(std::string_view raw) {
  while (!raw.empty() && raw.front() == '-') raw.remove_prefix(1);
  if (raw.empty() || raw.size() > 64) return false;
  const std::string name = LowerStr(raw);
  for (const char* n : kSecretNames) {
    if (name == n) return true;
  }
  for (const char* suf : kSecretSuffixes) {
    const size_t n = std::strlen(suf);
    if (name.size() >= n && name.compare(name.size() - n, n, suf) == 0) return true;
  }
  return false;
}

bool NameChar(char c) { return Word(c) || c == '-' || c == '.'; }

// The value starting at `b`: inside its quotes when quoted, else up to a
// delimiter (the line's end for Authorization/Cookie headers).
Range ValueAt(std::string_view s, size_t b, bool to_line_end) {
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
  while (e < s.size() && !std::strchr("&# \t\r\n,;\"'<>(){}[]\\", s[e])) ++e;
  return {b, e};
}

void ScanPairs(std::string_view s, std::vector<Range>* out) {
  for (size_t p = 0; p < s.size(); ++p) {
    const char c = s[p];
    if (c != '=' && c != ':' && c != ' ') continue;
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
      while (nb > 0 && NameChar(s[nb - 1])) --nb;
    }
    if (nb >= ne) continue;
    const std::string_view name = s.substr(nb, ne - nb);
    // "--api-key VALUE": only a flag name is followed by its value after a space.
    if (c == ' ' && name.front() != '-') continue;
    if (!SecretName(name)) continue;
    size_t b = p + 1;
    if (c == ':' && !quoted && b < s.size() && s[b] == '/') continue;  // a URL's scheme, not a pair
    if (c != ' ') {
      while (b < s.size() && s[b] == ' ') ++b;
    }
    if (b >= s.size() || AlreadyRedacted(s, b) || (b + 1 < s.size() && AlreadyRedacted(s, b + 1))) continue;
    const std::string lname = LowerStr(name);
    const bool whole_line = c == ':' && !quoted &&
                            (lname.find("authorization") != std::string::npos || lname.find("cookie") != std::string::npos);
    const Range v = ValueAt(s, b, whole_line);
    if (v.second > v.first) {
      out->push_back(v);
      p = std::max(p, v.second - 1);
    }
  }
}

bool ContainsSecretKey(const std::vector<std::string>& keys, std::string_view key) {
  const std::string lower = LowerStr(key);
  return std::any_of(keys.begin(), keys.end(), [&](const std::string& p) { return lower.find(p) != std::string::npos; });
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

}  // namespace

const std::vector<std::string>& DefaultSecretKeyPatterns() {
  static const std::vector<std::string> kPatterns = {
      "authorization", "password", "passwd", "secret",     "token",       "api_key",    "apikey",
      "api-key",       "cookie",   "private_key", "private-key", "credential", "session_key", "access_key",
      "access-key",    "x-auth"};
  return kPatterns;
}

Redactor::Redactor() : keys_(DefaultSecretKeyPatterns()) {}

Redactor::Redactor(std::vector<std::string> keys) : keys_(std::move(keys)) {
  for (auto& k : keys_) k = LowerStr(k);
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
      if (!x.is_string() || x.get_ref<const std::string&>().empty()) return bad(k + " must be a list of non-empty strings");
      const std::string& str = x.get_ref<const std::string&>();
      if (k == "keys") {
        r->keys_.push_back(LowerStr(str));
        continue;
      }
      try {
        r->values_.emplace_back(str, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        return bad("values: '" + str + "' is not a valid regex: " + e.what());
      }
      if (std::regex_search("", r->values_.back())) return bad("values: '" + str + "' matches the empty string");
    }
  }
  *out = std::move(r);
  return Status::Ok();
}

bool Redactor::SecretKey(std::string_view key) const { return ContainsSecretKey(keys_, key); }

bool Redactor::RedactString(std::string* s) const {
  if (s->size() < 6 && values_.empty()) return false;  // "pwd=xy" is the shortest we know
  std::vector<Range> r;
  const std::string_view v(*s);
  ScanPrefixed(v, &r);
  ScanAuthSchemes(v, &r);
  if (v.find("-----BEGIN ") != std::string_view::npos) ScanPem(v, &r);
  if (v.find("://") != std::string_view::npos) ScanUserinfo(v, &r);
  ScanPairs(v, &r);
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
          if (m.length(g) > 0 && !AlreadyRedacted(v, b)) r.push_back({b, b + static_cast<size_t>(m.length(g))});
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
  if (value.is_object()) {
    for (auto& [key, child] : value.items()) {
      const std::string child_path = path + "/" + PointerToken(key);
      if (SecretKey(key)) {
        if (child != kRedacted) {
          child = kRedacted;
          out.push_back(child_path);
        }
      } else {
        auto more = Redact(child, child_path);
        out.insert(out.end(), more.begin(), more.end());
      }
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string child_path = path + "/" + std::to_string(i);
      // ["--password", "VALUE"]: the element after a secret flag.
      if (i > 0 && value[i].is_string() && value[i - 1].is_string() && SecretFlag(value[i - 1].get<std::string>())) {
        if (value[i] != kRedacted) {
          value[i] = kRedacted;
          out.push_back(child_path);
        }
        continue;
      }
      auto more = Redact(value[i], child_path);
      out.insert(out.end(), more.begin(), more.end());
    }
  } else if (value.is_string()) {
    if (RedactString(&value.get_ref<std::string&>())) out.push_back(path);
  }
  return out;
}

std::vector<std::string> RedactSecrets(Json& value, const std::vector<std::string>& patterns, const std::string& path) {
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
    if (e.type != "policy.updated" || !e.data.is_object() || e.data.value("tier", "file") != "file") continue;
    std::shared_ptr<const Redactor> r;
    if (Redactor::FromPolicy(e.data.value("policy", Json::object()), &r).ok()) set(std::move(r));
  }
}

}  // namespace tollgate
