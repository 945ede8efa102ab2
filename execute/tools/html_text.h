// Text-level pieces of HTML shared by the two small tokenizers
// (html_markdown.h for web fetch, html_links.h for extract_links). The
// page is hostile input: each function is linear in what it reads. Pure,
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate {

// Appends code point `cp` as UTF-8; NUL, a surrogate or anything past
// U+10FFFF becomes U+FFFD, so the output stays valid UTF-8.
void AppendUtf8(uint32_t cp, std::string* out);

// `v` with its character references decoded: numeric (&#65; &#x41;) and
// the common named ones (&amp; &lt; &gt; &quot; &apos; &copy; &mdash; ...;
// &nbsp; and the other spaces as a plain, collapsible space; &shy; dropped).
// An unknown or malformed reference, or one without its ';', stays as
// written.
std::string DecodeCharRefs(std::string_view v);

// Where "</name" (name lower-case; the input in any case) starts at or
// after `from`, else npos: the end of a raw-text element such as <script>.
size_t FindClosingTag(std::string_view html, size_t from, std::string_view name);

}  // namespace tollgate
