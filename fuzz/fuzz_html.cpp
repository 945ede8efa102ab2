// libFuzzer target: a fetched page is hostile (web fetch's HTML to Markdown,
// extract_links' links; execute/tools/html_markdown.h, html_links.h). Input:
// the page. The Markdown must be valid UTF-8 and stay within its cap (plus
// one text run), the title within 512 bytes, and every link an absolute
// http(s) URL, at most the number asked for.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/canonical_json.h"
#include "execute/tools/html_links.h"
#include "execute/tools/html_markdown.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tollgate;
  const std::string_view page(reinterpret_cast<const char*>(data), size);
  constexpr size_t kCap = 4096;
  const MarkdownPage md = HtmlToMarkdown(page, "https://example.com/dir/page.html", kCap);
  if (ToValidUtf8(md.markdown) != md.markdown || ToValidUtf8(md.title) != md.title) std::abort();
  if (md.title.size() > 512) std::abort();
  if (md.markdown.size() > kCap + size + 64) std::abort();
  bool truncated = false;
  const auto links = ExtractLinks(page, "https://example.com/dir/page.html", 16, &truncated);
  if (links.size() > 16) std::abort();
  for (const std::string& l : links) {
    if (l.rfind("http://", 0) != 0 && l.rfind("https://", 0) != 0) std::abort();
  }
  return 0;
}
