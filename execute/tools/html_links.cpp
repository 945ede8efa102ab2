#include "execute/tools/html_links.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>

#include "core/url.h"

namespace tollgate {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool Space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == ':';
}

// Where "</name" (any case) starts at or after `from`, else npos.
size_t FindClosing(std::string_view html, size_t from, const std::string& name) {
  for (size_t i = html.find("</", from); i != std::string_view::npos; i = html.find("</", i + 2)) {
    size_t k = 0;
    while (k < name.size() && i + 2 + k < html.size() && Lower(html[i + 2 + k]) == name[k]) ++k;
    if (k == name.size()) return i;
  }
  return std::string_view::npos;
}

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

// An attribute value with its character references decoded and the
// whitespace a URL parser strips removed (ends trimmed; tab and newline
// dropped inside).
std::string DecodeValue(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c == '\t' || c == '\n' || c == '\r') continue;
    if (c != '&') {
      out += c;
      continue;
    }
    const size_t semi = v.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out += c;
      continue;
    }
    const std::string_view ref = v.substr(i + 1, semi - i - 1);
    static const std::pair<std::string_view, char> kNamed[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    bool done = false;
    for (const auto& [name, ch] : kNamed) {
      if (ref == name) {
        out += ch;
        done = true;
      }
    }
    if (!done && ref.size() >= 2 && ref[0] == '#') {
      const bool hex = ref[1] == 'x' || ref[1] == 'X';
      uint32_t cp = 0;
      bool digits = ref.size() > (hex ? 2u : 1u);
      for (size_t k = hex ? 2 : 1; k < ref.size() && digits; ++k) {
        const char d = Lower(ref[k]);
        int val = d >= '0' && d <= '9' ? d - '0' : (hex && d >= 'a' && d <= 'f' ? d - 'a' + 10 : -1);
        if (val < 0) digits = false;
        cp = std::min<uint32_t>(cp * (hex ? 16 : 10) + (val < 0 ? 0 : val), 0x110000);
      }
      if (digits) {
        AppendUtf8(cp, &out);
        done = true;
      }
    }
    if (!done) {
      out += c;
      continue;
    }
    i = semi;
  }
  size_t b = 0, e = out.size();
  while (b < e && (out[b] == ' ' || out[b] == '\f')) ++b;
  while (e > b && (out[e - 1] == ' ' || out[e - 1] == '\f')) --e;
  return out.substr(b, e - b);
}

}  // namespace

std::vector<std::string> ExtractLinks(std::string_view html, const std::string& page_url, size_t max,
                                      bool* truncated) {
  std::vector<std::string> links;
  std::unordered_set<std::string> seen;
  *truncated = false;
  const size_t n = html.size();
  size_t pos = 0;
  while (pos < n) {
    const size_t lt = html.find('<', pos);
    if (lt == std::string_view::npos) break;
    if (html.compare(lt, 4, "<!--") == 0) {
      const size_t end = html.find("-->", lt + 4);
      pos = end == std::string_view::npos ? n : end + 3;
      continue;
    }
    size_t i = lt + 1;
    std::string tag;
    while (i < n && NameChar(html[i])) tag += Lower(html[i++]);
    if (tag.empty()) {  // "</a>", "<!DOCTYPE", "< x": nothing to read
      pos = lt + 1;
      continue;
    }
    // Attributes, up to the tag's '>'.
    std::string href;
    bool has_href = false;
    while (i < n && html[i] != '>') {
      if (Space(html[i]) || html[i] == '/') {
        ++i;
        continue;
      }
      std::string name;
      while (i < n && !Space(html[i]) && html[i] != '=' && html[i] != '>' && html[i] != '/') {
        name += Lower(html[i++]);
      }
      if (name.empty()) name += html[i++];  // a stray '=': one byte on
      while (i < n && Space(html[i])) ++i;
      std::string_view value;
      if (i < n && html[i] == '=') {
        ++i;
        while (i < n && Space(html[i])) ++i;
        if (i < n && (html[i] == '"' || html[i] == '\'')) {
          const char q = html[i++];
          const size_t close = html.find(q, i);
          const size_t end = close == std::string_view::npos ? n : close;
          value = html.substr(i, end - i);
          i = end == n ? n : end + 1;
        } else {
          const size_t start = i;
          while (i < n && !Space(html[i]) && html[i] != '>') ++i;
          value = html.substr(start, i - start);
        }
      }
      if (tag == "a" && name == "href" && !has_href) {  // the first href counts, as in a browser
        has_href = true;
        href = DecodeValue(value);
      }
    }
    pos = i < n ? i + 1 : n;
    if (tag == "script" || tag == "style" || tag == "textarea" || tag == "title") {
      const size_t close = FindClosing(html, pos, tag);
      pos = close == std::string_view::npos ? n : close;
      continue;
    }
    if (!has_href || href.empty() || href[0] == '#') continue;
    NormalUrl u;
    std::string why;
    if (!NormalizeUrl(href, page_url, &u, &why, Userinfo::kDrop)) continue;
    if (!seen.insert(u.full).second) continue;
    if (links.size() == max) {
      *truncated = true;
      break;
    }
    links.push_back(u.full);
  }
  return links;
}

}  // namespace tollgate
