#include "execute/tools/html_links.h"

#include <unordered_set>

#include "core/url.h"
#include "execute/tools/html_text.h"

namespace tollgate {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool Space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == ':';
}

// An attribute value with its character references decoded and the
// whitespace a URL parser strips removed (tab and newline dropped inside,
// then the ends trimmed).
std::string DecodeValue(std::string_view v) {
  std::string raw;
  raw.reserve(v.size());
  for (const char c : v) {
    if (c != '\t' && c != '\n' && c != '\r') raw += c;
  }
  const std::string out = DecodeCharRefs(raw);
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
      const size_t close = FindClosingTag(html, pos, tag);
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
