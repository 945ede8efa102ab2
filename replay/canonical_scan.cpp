#include "replay/canonical_scan.h"

#include <cstdint>
#include <cstring>

namespace tollgate::replay {
namespace {

constexpr int kMaxDepth = 64;

struct Scanner {
  std::string_view t;
  size_t p = 0;

  bool At(char c) const { return p < t.size() && t[p] == c; }
  bool Eat(char c) {
    if (!At(c)) return false;
    ++p;
    return true;
  }
  static bool Hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
  static int HexVal(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

  // One well-formed UTF-8 sequence starting at p (a byte >= 0x80), RFC 3629.
  bool Utf8() {
    const auto b = [&](size_t i) { return static_cast<unsigned char>(t[p + i]); };
    const unsigned char c = b(0);
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
      n = 2;
    else if (c == 0xE0)
      n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC)
      n = 3;
    else if (c == 0xED)
      n = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF)
      n = 3;
    else if (c == 0xF0)
      n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      n = 4;
    else if (c == 0xF4)
      n = 4, hi = 0x8F;
    else
      return false;
    if (p + n > t.size()) return false;
    if (b(1) < lo || b(1) > hi) return false;
    for (size_t i = 2; i < n; ++i) {
      if (b(i) < 0x80 || b(i) > 0xBF) return false;
    }
    p += n;
    return true;
  }

  // A string; *plain is false when it holds an escape.
  bool String(std::string_view* inner, bool* plain) {
    if (!Eat('"')) return false;
    const size_t start = p;
    *plain = true;
    while (p < t.size()) {
      const unsigned char c = static_cast<unsigned char>(t[p]);
      if (c == '"') {
        *inner = t.substr(start, p - start);
        ++p;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        *plain = false;
        if (++p >= t.size()) return false;
        const char e = t[p];
        if (e == 'u') {
          if (p + 4 >= t.size()) return false;
          int v = 0;
          for (int i = 1; i <= 4; ++i) {
            if (!Hex(t[p + i])) return false;
            v = v << 4 | HexVal(t[p + i]);
          }
          if (v >= 0xD800 && v <= 0xDFFF) return false;  // surrogates: leave them to the parser
          p += 5;
        } else if (std::strchr("\"\\/bfnrt", e) != nullptr && e != '\0') {
          ++p;
        } else {
          return false;
        }
      } else if (c >= 0x80) {
        if (!Utf8()) return false;
      } else {
        ++p;
      }
    }
    return false;
  }

  bool Digits(size_t max, size_t* n) {
    const size_t start = p;
    while (p < t.size() && t[p] >= '0' && t[p] <= '9') ++p;
    *n = p - start;
    return *n > 0 && *n <= max;
  }

  // JSON number grammar; bounded so that no parser overflows it.
  bool Number() {
    Eat('-');
    size_t n;
    if (At('0')) {
      ++p;
    } else if (!Digits(25, &n)) {
      return false;
    }
    if (Eat('.') && !Digits(40, &n)) return false;
    if (At('e') || At('E')) {
      ++p;
      if (!Eat('+')) Eat('-');
      if (!Digits(2, &n)) return false;  // |exponent| <= 99
    }
    return true;
  }

  bool Literal(std::string_view lit) {
    if (t.substr(p, lit.size()) != lit) return false;
    p += lit.size();
    return true;
  }

  bool Value(int depth) {
    if (p >= t.size()) return false;
    switch (t[p]) {
      case '{':
        return Object(depth + 1, nullptr);
      case '[':
        return Array(depth + 1);
      case '"': {
        std::string_view s;
        bool plain;
        return String(&s, &plain);
      }
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  bool Array(int depth) {
    if (depth > kMaxDepth || !Eat('[')) return false;
    if (Eat(']')) return true;
    for (;;) {
      if (!Value(depth)) return false;
      if (Eat(']')) return true;
      if (!Eat(',')) return false;
    }
  }

  // `members` set: the top level, whose keys must be plain and strictly
  // increasing (canonical: sorted, no duplicate).
  bool Object(int depth, std::vector<CanonicalMember>* members) {
    if (depth > kMaxDepth || !Eat('{')) return false;
    if (Eat('}')) return true;
    std::string_view prev;
    bool first = true;
    for (;;) {
      const size_t member_at = p;
      std::string_view key;
      bool plain;
      if (!String(&key, &plain) || !Eat(':')) return false;
      const size_t value_at = p;
      if (!Value(depth)) return false;
      if (members != nullptr) {
        if (!plain || (!first && !(prev < key))) return false;
        members->push_back({key, t.substr(member_at, p - member_at), t.substr(value_at, p - value_at)});
        prev = key;
        first = false;
      }
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
    }
  }
};

// Builds the value while it scans (Scanner's grammar and limits): strings
// are copied as they stand (none holds an escape), integers of up to 18
// digits are converted here, other numbers by nlohmann's own parser, so each
// value is the one ParseJson makes.
struct Builder : Scanner {
  bool Build(int depth, Json* out) {
    if (p >= t.size()) return false;
    switch (t[p]) {
      case '{':
        return BuildObject(depth + 1, out);
      case '[':
        return BuildArray(depth + 1, out);
      case '"': {
        std::string_view s;
        bool plain;
        if (!String(&s, &plain) || !plain) return false;
        *out = std::string(s);
        return true;
      }
      case 't':
        *out = true;
        return Literal("true");
      case 'f':
        *out = false;
        return Literal("false");
      case 'n':
        *out = nullptr;
        return Literal("null");
      default: {
        const size_t start = p;
        if (!Number()) return false;
        return BuildNumber(t.substr(start, p - start), out);
      }
    }
  }

  static bool BuildNumber(std::string_view n, Json* out) {
    const bool neg = n[0] == '-';
    const std::string_view digits = neg ? n.substr(1) : n;
    if (digits.size() <= 18 && digits.find_first_not_of("0123456789") == std::string_view::npos) {
      uint64_t v = 0;
      for (char c : digits) v = v * 10 + static_cast<uint64_t>(c - '0');
      if (neg)
        *out = -static_cast<int64_t>(v);  // nlohmann: a signed integer, -0 included
      else
        *out = v;
      return true;
    }
    try {
      *out = Json::parse(n.begin(), n.end());
    } catch (const Json::exception&) {
      return false;
    }
    return true;
  }

  bool BuildArray(int depth, Json* out) {
    if (depth > kMaxDepth || !Eat('[')) return false;
    *out = Json::array();
    auto& items = out->get_ref<Json::array_t&>();
    if (Eat(']')) return true;
    for (;;) {
      if (!Build(depth, &items.emplace_back())) return false;
      if (Eat(']')) return true;
      if (!Eat(',')) return false;
    }
  }

  bool BuildObject(int depth, Json* out) {
    if (depth > kMaxDepth || !Eat('{')) return false;
    *out = Json::object();
    auto& members = out->get_ref<Json::object_t&>();
    if (Eat('}')) return true;
    std::string_view prev;
    for (;;) {
      std::string_view key;
      bool plain;
      if (!String(&key, &plain) || !plain || (!members.empty() && !(prev < key)) || !Eat(':')) return false;
      prev = key;
      if (!Build(depth, &members.emplace_hint(members.end(), std::string(key), Json())->second)) return false;
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
    }
  }
};

}  // namespace

bool ParseCanonicalObject(std::string_view object, Json* out) {
  Builder b;
  b.t = object;
  return b.BuildObject(1, out) && b.p == object.size();
}

bool ScanCanonicalObject(std::string_view object, std::vector<CanonicalMember>* out) {
  out->clear();
  Scanner s{object};
  return s.Object(1, out) && s.p == object.size();
}

bool CanonicalSubset(std::string_view object, const char* const* keys, std::string* out) {
  thread_local std::vector<CanonicalMember> members;
  if (!ScanCanonicalObject(object, &members)) return false;
  out->clear();
  out->push_back('{');
  bool first = true;
  for (const CanonicalMember& m : members) {
    bool wanted = false;
    for (const char* const* k = keys; *k != nullptr; ++k) {
      if (m.key == *k) {
        wanted = true;
        break;
      }
    }
    if (!wanted) continue;
    if (!first) out->push_back(',');
    out->append(m.member);
    first = false;
  }
  out->push_back('}');
  return true;
}

}  // namespace tollgate::replay
