// The links of an HTML page, for Kaizen's extract_links: the href of every
// <a> element, resolved against the page's URL (RFC 3986, core/url.h's
// NormalizeUrl: the fragment dropped, the URL normalised as decide would),
// in document order, each once.
//
// A small tokenizer, not a browser: it skips comments and the contents of
// <script>, <style>, <textarea> and <title>; reads an attribute's value
// double-quoted, single-quoted or bare; decodes its character references
// (html_text.h's DecodeCharRefs: &amp;, &#39;, ...). A link that is empty, only a fragment
// ("#top": the page itself), not http(s) after resolution (mailto:,
// javascript:, data:) or not a valid URL is left out. <base href> is
// ignored: links resolve against the URL the page came from. The page is
// untrusted input: the scan is linear, and stops after `max` links
// (*truncated then true). Pure, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

std::vector<std::string> ExtractLinks(std::string_view html, const std::string& page_url, size_t max,
                                      bool* truncated);

}  // namespace tollgate
