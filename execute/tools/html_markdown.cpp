#include "execute/tools/html_markdown.h"

#include <algorithm>
#include <vector>

#include "core/canonical_json.h"
#include "core/url.h"
#include "execute/tools/html_text.h"

namespace tollgate {
namespace {

constexpr size_t kMaxHrefBytes = 2048;  // longer links keep their text only
constexpr size_t kMaxBaseBytes = 4096;  // a longer page URL resolves absolute links only
constexpr size_t kMaxAttrBytes = 4096;  // attribute values kept (href, src, alt, start)
constexpr size_t kMaxTitleBytes = 512;

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool Space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool Alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

struct Tag {
  std::string name;  // lower-case
  bool end = false;
  std::string href, src, alt, start;
};

// Reads the tag starting at html[lt] == '<' (a letter or '/'+letter
// follows); returns the position after its '>' (or the end of input).
size_t ReadTag(std::string_view html, size_t lt, Tag* t) {
  const size_t n = html.size();
  size_t i = lt + 1;
  if (html[i] == '/') {
    t->end = true;
    ++i;
  }
  while (i < n && !Space(html[i]) && html[i] != '/' && html[i] != '>') {
    if (t->name.size() < 32) t->name += Lower(html[i]);
    ++i;
  }
  while (i < n && html[i] != '>') {
    if (Space(html[i]) || html[i] == '/') {
      ++i;
      continue;
    }
    std::string attr;
    while (i < n && !Space(html[i]) && html[i] != '=' && html[i] != '>' && html[i] != '/') {
      if (attr.size() < 16) attr += Lower(html[i]);
      ++i;
    }
    while (i < n && Space(html[i])) ++i;
    if (i >= n || html[i] != '=') continue;
    ++i;
    while (i < n && Space(html[i])) ++i;
    size_t b = i, e = i;
    if (i < n && (html[i] == '"' || html[i] == '\'')) {
      const char q = html[i];
      const size_t close = html.find(q, i + 1);
      b = i + 1;
      e = close == std::string_view::npos ? n : close;
      i = close == std::string_view::npos ? n : close + 1;
    } else {
      while (i < n && !Space(html[i]) && html[i] != '>') ++i;
      e = i;
    }
    std::string* dst = attr == "href"    ? &t->href
                       : attr == "src"   ? &t->src
                       : attr == "alt"   ? &t->alt
                       : attr == "start" ? &t->start
                                         : nullptr;
    if (dst != nullptr && dst->empty()) *dst = DecodeCharRefs(html.substr(b, std::min(e - b, kMaxAttrBytes)));
  }
  return i < n ? i + 1 : n;
}

enum class Kind { kA, kEm, kStrong, kCode, kDel, kList, kLi, kQuote, kPre, kHeading };

struct Open {
  Kind kind;
  std::string name;    // the tag that opened it
  size_t mark = 0;     // output size right after its opening marker
  std::string marker;  // its opening marker (kA: "[")
  std::string href;    // kA
  int counter = 0;     // kList: next number, 0 = bullets
};

class Converter {
 public:
  Converter(const std::string& page_url, size_t max_bytes)
      : base_(page_url.size() <= kMaxBaseBytes ? page_url : ""), max_(max_bytes) {}

  MarkdownPage Run(std::string_view html) {
    const size_t n = html.size();
    size_t pos = 0;
    while (pos < n && out_.size() < max_) {
      const size_t lt = html.find('<', pos);
      if (lt != pos && drop_ == 0) Text(html.substr(pos, (lt == std::string_view::npos ? n : lt) - pos));
      if (lt == std::string_view::npos) {
        pos = n;
        break;
      }
      if (html.compare(lt, 4, "<!--") == 0) {
        const size_t end = html.find("-->", lt + 4);
        pos = end == std::string_view::npos ? n : end + 3;
        continue;
      }
      const char next = lt + 1 < n ? html[lt + 1] : '\0';
      if (next == '!' || next == '?') {
        const size_t end = html.find('>', lt);
        pos = end == std::string_view::npos ? n : end + 1;
        continue;
      }
      if (!Alpha(next) && !(next == '/' && lt + 2 < n && Alpha(html[lt + 2]))) {
        if (drop_ == 0) Text("<");
        pos = lt + 1;
        continue;
      }
      Tag t;
      pos = ReadTag(html, lt, &t);
      pos = Handle(t, html, pos);
    }
    if (pre_ > 0) CloseNamed(Kind::kPre);
    MarkdownPage page;
    page.complete = pos >= n;
    // The page's bytes are anyone's: whatever path a byte took, what leaves is UTF-8.
    page.title = ToValidUtf8(title_);
    page.markdown = ToValidUtf8(Finish());
    return page;
  }

 private:
  // The elements whose contents are raw text (never markup), skipped to
  // their closing tag; title's is kept apart.
  static bool RawText(const std::string& n) {
    return n == "script" || n == "style" || n == "noscript" || n == "textarea" || n == "xmp" ||
           n == "iframe" || n == "noembed" || n == "noframes" || n == "title";
  }
  // Blocks set apart by a blank line, at their start and their end.
  static bool Paragraph(const std::string& n) {
    return n == "p" || n == "section" || n == "article" || n == "header" || n == "footer" || n == "main" ||
           n == "nav" || n == "aside" || n == "figure" || n == "form" || n == "address" || n == "details" ||
           n == "fieldset" || n == "dl" || n == "center";
  }
  // Blocks on lines of their own.
  static bool LineBlock(const std::string& n) {
    return n == "div" || n == "figcaption" || n == "summary" || n == "dt" || n == "dd" || n == "caption" ||
           n == "legend";
  }
  // Markup whose contents are not the page's text.
  static bool Dropped(const std::string& n) {
    return n == "svg" || n == "math" || n == "template" || n == "object" || n == "canvas" || n == "audio" ||
           n == "video" || n == "select" || n == "datalist";
  }

  // Handles one tag; returns where to go on (past a raw-text element).
  size_t Handle(const Tag& t, std::string_view html, size_t pos) {
    const std::string& n = t.name;
    if (!t.end && RawText(n)) {
      const size_t close = FindClosingTag(html, pos, n);
      const size_t end = close == std::string_view::npos ? html.size() : close;
      if (n == "title" && !seen_title_ && drop_ == 0) {
        seen_title_ = true;
        title_ = Collapse(DecodeCharRefs(html.substr(pos, std::min<size_t>(end - pos, 8 * kMaxTitleBytes))));
        // Valid first, then cut on a character boundary: replacing invalid
        // bytes after the cut could triple the length (U+FFFD is 3 bytes).
        title_ = ToValidUtf8(title_);
        if (title_.size() > kMaxTitleBytes) {
          size_t cut = kMaxTitleBytes;
          while (cut > 0 && (static_cast<unsigned char>(title_[cut]) & 0xC0) == 0x80) --cut;
          title_.resize(cut);
        }
      }
      if (close == std::string_view::npos) return html.size();
      const size_t gt = html.find('>', close);
      return gt == std::string_view::npos ? html.size() : gt + 1;
    }
    if (drop_ > 0) {
      if (n == drop_name_) drop_ += t.end ? -1 : 1;
      return pos;
    }
    if (!t.end && Dropped(n)) {
      drop_ = 1;
      drop_name_ = n;
      return pos;
    }
    if (t.end) {
      End(n);
    } else {
      Start(t);
    }
    return pos;
  }

  void Start(const Tag& t) {
    const std::string& n = t.name;
    if (n.size() == 2 && n[0] == 'h' && n[1] >= '1' && n[1] <= '6') {
      Break(2);
      Push(Kind::kHeading, n, std::string(static_cast<size_t>(n[1] - '0'), '#') + " ");
      ++inline_only_;
    } else if (Paragraph(n)) {
      Break(2);
    } else if (LineBlock(n)) {
      Break(1);
    } else if (n == "br") {
      if (pre_ > 0) {
        PreText("\n");
      } else if (line_start_ && breaks_ >= 1) {
        breaks_ = 2;
      } else {
        Break(1);
      }
    } else if (n == "hr") {
      Break(2);
      Begin();
      out_ += "---";
      Break(2);
    } else if (n == "a") {
      if (Find(Kind::kA) != kNone) CloseNamed(Kind::kA);  // an <a> closes an open one
      Push(Kind::kA, n, "[", t.href);
    } else if (n == "em" || n == "i") {
      Push(Kind::kEm, n, "*");
    } else if (n == "strong" || n == "b") {
      Push(Kind::kStrong, n, "**");
    } else if (n == "del" || n == "s" || n == "strike") {
      Push(Kind::kDel, n, "~~");
    } else if (n == "code" || n == "kbd" || n == "samp" || n == "tt") {
      Push(Kind::kCode, n, "`");
    } else if (n == "pre") {
      Break(2);
      Begin();
      out_ += "```";
      NewLine();
      Push(Kind::kPre, n, "");
      ++pre_;
      pre_start_ = true;
    } else if (n == "ul" || n == "ol" || n == "menu") {
      Break(Lists() == 0 ? 2 : 1);
      int counter = 0;
      if (n == "ol") {
        counter = 1;
        if (!t.start.empty() && t.start.size() < 8 &&
            t.start.find_first_not_of("0123456789") == std::string::npos) {
          counter = std::max(1, std::stoi(t.start));
        }
      }
      Push(Kind::kList, n, "", "", counter);
    } else if (n == "li") {
      const size_t li = Find(Kind::kLi), list = Find(Kind::kList);
      if (li != kNone && (list == kNone || li > list)) CloseAt(li);
      Break(1);
      const size_t l = Find(Kind::kList);
      std::string marker = "- ";
      if (l != kNone && stack_[l].counter > 0) marker = std::to_string(stack_[l].counter++) + ". ";
      if (Push(Kind::kLi, n, "")) PushPrefix(marker, std::string(marker.size(), ' '));
    } else if (n == "blockquote") {
      Break(2);
      if (Push(Kind::kQuote, n, "")) PushPrefix("> ", "> ");
    } else if (n == "table") {
      if (tables_++ == 0) Break(2);
    } else if (n == "tr") {
      if (tables_ == 1) StartRow();
    } else if (n == "td" || n == "th") {
      if (tables_ == 1) {
        if (!in_row_) StartRow();
        EndCell();
        out_ += ' ';
        in_cell_ = true;
        no_space_ = true;
      } else {
        space_ = !line_start_;
      }
    } else if (n == "img") {
      if (t.alt.empty()) return;
      NormalUrl u;
      std::string why;
      const std::string alt = Collapse(t.alt.substr(0, 512));
      if (!t.src.empty() && t.src.size() <= kMaxHrefBytes &&
          NormalizeUrl(t.src, base_, &u, &why, Userinfo::kDrop)) {
        Begin();
        out_ += "![" + alt + "](" + u.full + ")";
      } else {
        Text(alt);
      }
    }
  }

  void End(const std::string& n) {
    if (n.size() == 2 && n[0] == 'h' && n[1] >= '1' && n[1] <= '6') {
      CloseNamed(Kind::kHeading);
    } else if (Paragraph(n)) {
      Break(2);
    } else if (LineBlock(n)) {
      Break(1);
    } else if (n == "a") {
      CloseNamed(Kind::kA);
    } else if (n == "em" || n == "i") {
      CloseNamed(Kind::kEm);
    } else if (n == "strong" || n == "b") {
      CloseNamed(Kind::kStrong);
    } else if (n == "del" || n == "s" || n == "strike") {
      CloseNamed(Kind::kDel);
    } else if (n == "code" || n == "kbd" || n == "samp" || n == "tt") {
      CloseNamed(Kind::kCode);
    } else if (n == "pre") {
      CloseNamed(Kind::kPre);
    } else if (n == "ul" || n == "ol" || n == "menu") {
      CloseNamed(Kind::kList);
    } else if (n == "li") {
      CloseNamed(Kind::kLi);
    } else if (n == "blockquote") {
      CloseNamed(Kind::kQuote);
    } else if (n == "table") {
      if (tables_ == 1) {
        EndRow();
        Break(2);
      }
      if (tables_ > 0) --tables_;
    } else if (n == "tr") {
      if (tables_ == 1) EndRow();
    } else if (n == "td" || n == "th") {
      if (tables_ == 1) EndCell();
    }
  }

  // --- the element stack ---
  static constexpr size_t kNone = static_cast<size_t>(-1);

  size_t Find(Kind k) const {
    for (size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].kind == k) return i;
    }
    return kNone;
  }
  size_t Lists() const {
    size_t c = 0;
    for (const auto& o : stack_) c += o.kind == Kind::kList;
    return c;
  }
  // False when the stack is full: the element is then not tracked.
  bool Push(Kind k, const std::string& name, const std::string& marker, const std::string& href = "",
            int counter = 0) {
    if (stack_.size() >= kMaxOpenElements) return false;
    const bool inline_marker = !marker.empty() && (pre_ == 0 || k == Kind::kHeading);
    if (inline_marker) {
      Begin();
      out_ += marker;
      no_space_ = true;
    }
    stack_.push_back(Open{k, name, out_.size(), inline_marker ? marker : "", href, counter});
    return true;
  }
  void CloseNamed(Kind k) {
    const size_t i = Find(k);
    if (i != kNone) CloseAt(i);
  }
  // Closes stack_[i] and everything opened after it.
  void CloseAt(size_t i) {
    while (stack_.size() > i) {
      Open o = std::move(stack_.back());
      stack_.pop_back();
      Closed(o);
    }
  }
  void Closed(const Open& o) {
    if (!o.marker.empty() && out_.size() == o.mark) {  // nothing inside: no marker either
      out_.resize(o.mark - o.marker.size());
      if (!out_.empty() && out_.back() == ' ') {
        out_.pop_back();
        space_ = true;
      }
      no_space_ = false;
      if (o.kind == Kind::kHeading) --inline_only_;
      if (o.kind == Kind::kHeading) Break(2);
      return;
    }
    switch (o.kind) {
      case Kind::kA: {
        if (o.marker.empty()) return;
        NormalUrl u;
        std::string why;
        if (!o.href.empty() && o.href.size() <= kMaxHrefBytes &&
            NormalizeUrl(o.href, base_, &u, &why, Userinfo::kDrop)) {
          out_ += "](" + u.full + ")";
        } else {
          out_.erase(o.mark - 1, 1);  // text only; shifts just the link's own text
        }
        return;
      }
      case Kind::kEm:
      case Kind::kStrong:
      case Kind::kDel:
      case Kind::kCode:
        if (!o.marker.empty()) out_ += o.marker;
        return;
      case Kind::kHeading:
        --inline_only_;
        Break(2);
        return;
      case Kind::kPre:
        --pre_;
        if (!pre_line_start_) NewLine();
        out_ += "```";
        Break(2);
        return;
      case Kind::kList:
        Break(Lists() == 0 ? 2 : 1);
        return;
      case Kind::kLi:
        PopPrefix();
        Break(1);
        return;
      case Kind::kQuote:
        PopPrefix();
        Break(2);
        return;
    }
  }

  // --- tables (the outermost only) ---
  void StartRow() {
    EndRow();
    Break(1);
    Begin();
    out_ += '|';
    in_row_ = true;
    cells_ = 0;
    ++inline_only_;
  }
  void EndCell() {
    if (!in_cell_) return;
    out_ += " |";
    ++cells_;
    in_cell_ = false;
    space_ = false;
  }
  void EndRow() {
    EndCell();
    if (!in_row_) return;
    in_row_ = false;
    --inline_only_;
    if (rows_++ == 0) {
      Break(1);
      Begin();
      out_ += '|';
      for (int c = 0; c < std::max(cells_, 1) && c < 64; ++c) out_ += " --- |";
    }
    Break(1);
  }

  // --- output ---
  // Line prefixes: {first line, following lines} per quote or list item.
  void PushPrefix(const std::string& first, const std::string& cont) {
    prefix_.push_back({first, cont, true});
  }
  void PopPrefix() {
    if (!prefix_.empty()) prefix_.pop_back();
  }
  void WritePrefix(bool blank) {
    // A blank line belongs to the quotes around both the lines it separates.
    const size_t levels =
        std::min({prefix_.size(), kMaxPrefixLevels, blank ? break_levels_ : prefix_.size()});
    std::string p;
    for (size_t i = 0; i < levels; ++i) {
      auto& part = prefix_[i];
      if (blank) {
        if (part.cont == "> ") p += ">";
        continue;
      }
      p += part.first_pending ? part.first : part.cont;
      part.first_pending = false;
    }
    out_ += p;
  }
  void Break(int n) {
    if (inline_only_ > 0) {
      space_ = !line_start_;
      return;
    }
    if (out_.empty()) return;
    break_levels_ = line_start_ ? std::min(break_levels_, prefix_.size()) : prefix_.size();
    breaks_ = std::max(breaks_, n);
    line_start_ = true;
    space_ = false;
  }
  // Before content: the pending line breaks and prefix, or a space.
  void Begin() {
    if (line_start_) {
      if (!out_.empty()) {
        out_ += '\n';
        if (breaks_ >= 2) {
          WritePrefix(true);
          out_ += '\n';
        }
      }
      WritePrefix(false);
      line_start_ = false;
      breaks_ = 0;
      space_ = false;
    } else if (space_) {
      out_ += ' ';
      space_ = false;
    }
  }
  // Inside pre: a new line with the prefix.
  void NewLine() {
    out_ += '\n';
    WritePrefix(false);
    pre_line_start_ = true;
  }
  void PreText(std::string_view s) {
    for (char c : s) {
      if (c == '\r') continue;
      if (c == '\n') {
        if (pre_start_) {  // the newline right after <pre> is not content
          pre_start_ = false;
          continue;
        }
        NewLine();
      } else {
        out_ += c;
        pre_line_start_ = false;
      }
      pre_start_ = false;
    }
  }
  void Text(std::string_view raw) {
    const std::string s = DecodeCharRefs(raw);
    if (pre_ > 0) {
      PreText(s);
      return;
    }
    size_t i = 0;
    while (i < s.size()) {
      if (Space(s[i])) {
        if (!line_start_ && !no_space_) space_ = true;
        ++i;
        continue;
      }
      size_t j = i;
      while (j < s.size() && !Space(s[j])) ++j;
      Begin();
      no_space_ = false;
      if (in_cell_) {
        for (size_t k = i; k < j; ++k) {
          if (s[k] == '|') out_ += '\\';
          out_ += s[k];
        }
      } else {
        out_.append(s, i, j - i);
      }
      i = j;
    }
  }
  static std::string Collapse(const std::string& s) {
    std::string out;
    bool space = false;
    for (char c : s) {
      if (Space(c)) {
        space = !out.empty();
        continue;
      }
      if (space) out += ' ';
      space = false;
      out += c;
    }
    return out;
  }
  // Trailing spaces of every line dropped, the end trimmed, UTF-8 checked.
  std::string Finish() {
    std::string r;
    r.reserve(out_.size());
    size_t line = 0;
    for (size_t i = 0; i <= out_.size(); ++i) {
      if (i == out_.size() || out_[i] == '\n') {
        size_t e = i;
        while (e > line && out_[e - 1] == ' ') --e;
        r.append(out_, line, e - line);
        if (i < out_.size()) r += '\n';
        line = i + 1;
      }
    }
    while (!r.empty() && (r.back() == '\n' || r.back() == ' ')) r.pop_back();
    return ToValidUtf8(r);
  }

  struct PrefixPart {
    std::string first, cont;
    bool first_pending;
  };

  std::string base_;
  size_t max_;
  std::string out_, title_;
  bool seen_title_ = false;
  std::vector<Open> stack_;
  std::vector<PrefixPart> prefix_;
  int breaks_ = 0;
  size_t break_levels_ = 0;  // prefix levels present throughout the pending break
  bool line_start_ = true, space_ = false, no_space_ = false;
  int inline_only_ = 0, pre_ = 0;
  bool pre_start_ = false, pre_line_start_ = false;
  int drop_ = 0;
  std::string drop_name_;
  int tables_ = 0, rows_ = 0, cells_ = 0;
  bool in_row_ = false, in_cell_ = false;
};

}  // namespace

MarkdownPage HtmlToMarkdown(std::string_view html, const std::string& page_url, size_t max_bytes) {
  return Converter(page_url, max_bytes).Run(html);
}

}  // namespace tollgate
