#include "execute/tools/html_text.h"

#include <algorithm>
#include <utility>

namespace tollgate {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool Space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// The code point of a numeric reference's body ("#65", "#x41"), or false.
// Past U+10FFFF it saturates (AppendUtf8 makes it U+FFFD), so a long run
// of digits cannot overflow.
bool NumericRef(std::string_view ref, uint32_t* cp) {
  if (ref.size() < 2 || ref[0] != '#') return false;
  const bool hex = ref[1] == 'x' || ref[1] == 'X';
  if (ref.size() <= (hex ? 2u : 1u)) return false;
  *cp = 0;
  for (size_t k = hex ? 2 : 1; k < ref.size(); ++k) {
    const char d = Lower(ref[k]);
    const int val = d >= '0' && d <= '9' ? d - '0' : (hex && d >= 'a' && d <= 'f' ? d - 'a' + 10 : -1);
    if (val < 0) return false;
    *cp = std::min<uint32_t>(*cp * (hex ? 16 : 10) + static_cast<uint32_t>(val), 0x110000);
  }
  return true;
}

}  // namespace

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string DecodeCharRefs(std::string_view v) {
  static const std::pair<std::string_view, uint32_t> kNamed[] = {
      {"amp", '&'},      {"lt", '<'},       {"gt", '>'},        {"quot", '"'},     {"apos", '\''},
      {"nbsp", ' '},     {"ensp", ' '},     {"emsp", ' '},      {"thinsp", ' '},   {"copy", 0xA9},
      {"reg", 0xAE},     {"trade", 0x2122}, {"hellip", 0x2026}, {"mdash", 0x2014}, {"ndash", 0x2013},
      {"lsquo", 0x2018}, {"rsquo", 0x2019}, {"ldquo", 0x201C},  {"rdquo", 0x201D}, {"laquo", 0xAB},
      {"raquo", 0xBB},   {"bull", 0x2022},  {"middot", 0xB7},   {"euro", 0x20AC},  {"pound", 0xA3},
      {"yen", 0xA5},     {"cent", 0xA2},    {"deg", 0xB0},      {"times", 0xD7},   {"divide", 0xF7},
      {"para", 0xB6},    {"sect", 0xA7},    {"larr", 0x2190},   {"rarr", 0x2192},  {"uarr", 0x2191},
      {"darr", 0x2193},  {"check", 0x2713}, {"plusmn", 0xB1},   {"frac12", 0xBD},  {"shy", 0}};
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c != '&') {
      out += c;
      continue;
    }
    // The reference's ';' within 32 bytes, before another '&' or a space:
    // the scan of each '&' is bounded, so the whole pass stays linear.
    size_t semi = i + 1;
    while (semi < v.size() && semi - i <= 32 && v[semi] != ';' && v[semi] != '&' && !Space(v[semi])) ++semi;
    if (semi >= v.size() || v[semi] != ';') {
      out += c;
      continue;
    }
    const std::string_view ref = v.substr(i + 1, semi - i - 1);
    bool done = false;
    uint32_t cp = 0;
    if (NumericRef(ref, &cp)) {
      AppendUtf8(cp, &out);
      done = true;
    } else {
      for (const auto& [name, named] : kNamed) {
        if (ref == name) {
          if (named != 0) AppendUtf8(named, &out);  // &shy; is dropped
          done = true;
          break;
        }
      }
    }
    if (!done) {
      out += c;
      continue;
    }
    i = semi;
  }
  return out;
}

size_t FindClosingTag(std::string_view html, size_t from, std::string_view name) {
  for (size_t i = html.find("</", from); i != std::string_view::npos; i = html.find("</", i + 2)) {
    size_t k = 0;
    while (k < name.size() && i + 2 + k < html.size() && Lower(html[i + 2 + k]) == name[k]) ++k;
    if (k == name.size()) return i;
  }
  return std::string_view::npos;
}

}  // namespace tollgate
