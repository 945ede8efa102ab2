// HTML to Markdown for Duragent's `web` fetch (docs/tools.md, "web"): a
// small tokenizer in one linear pass, not a browser.
//
// - headings (# ...), paragraphs and line breaks, links [text](absolute
//   URL) resolved against `page_url` (core/url.h's NormalizeUrl; a link
//   that is not http(s) after resolution keeps its text only), images with
//   alt text ![alt](url), lists (- and 1., nested by indentation),
//   emphasis (* and **), strike (~~), inline `code`, ```pre``` blocks,
//   blockquotes (> ), horizontal rules, tables roughly (one | row per <tr>,
//   a --- line after the first; nested tables flattened into their cell);
// - script, style, noscript, textarea, iframe and title contents are never
//   output (the first title is returned apart); svg, math, template, object,
//   canvas, audio, video and select contents neither; comments, doctypes and
//   <head>'s elements produce nothing;
// - character references decoded (numeric, and the common named ones);
//   whitespace collapsed outside <pre>; no Markdown escaping except | in
//   table cells.
//
// The page is hostile input: every step is linear in the input, at most
// kMaxOpenElements elements are tracked as open (deeper ones are treated as
// plain text containers), line prefixes (quotes, list indentation) stop
// growing past kMaxPrefixLevels, and conversion stops once the Markdown
// has passed `max_bytes` (complete = false; the caller cuts it). The
// output is valid UTF-8 whatever the input. Pure, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tollgate {

inline constexpr size_t kMaxOpenElements = 128;
inline constexpr size_t kMaxPrefixLevels = 16;

struct MarkdownPage {
  std::string title;     // the first <title>, whitespace collapsed, at most 512 bytes
  std::string markdown;  // a little over max_bytes at most by one text run of the page
  bool complete = true;  // false: stopped at max_bytes
};

MarkdownPage HtmlToMarkdown(std::string_view html, const std::string& page_url, size_t max_bytes);

}  // namespace tollgate
