// Globs and indexed glob sets (decide/glob.h).
#include "decide/glob.h"

#include <algorithm>
#include <cstdint>

namespace tollgate {

struct GlobOps {
  // Iterative wildcard matching with backtracking to the last '*': every op
  // but '*' consumes exactly one byte, so remembering the last star and how
  // much it has eaten is enough (linear in practice, O(n*m) worst case).
  static bool Match(const std::vector<Glob::Op>& ops, std::string_view s) {
    size_t p = 0, i = 0, star = SIZE_MAX, star_i = 0;
    while (i < s.size()) {
      if (p < ops.size()) {
        const Glob::Op& op = ops[p];
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (op.kind == Glob::Op::kAny) {
          star = p++;
          star_i = i;
          continue;
        }
        bool ok = op.kind == Glob::Op::kOne || (op.kind == Glob::Op::kLit && op.lit == s[i]) ||
                  (op.kind == Glob::Op::kClass && op.cls.test(c));
        if (ok) {
          ++p;
          ++i;
          continue;
        }
      }
      if (star == SIZE_MAX) return false;
      p = star + 1;
      i = ++star_i;
    }
    while (p < ops.size() && ops[p].kind == Glob::Op::kAny) ++p;
    return p == ops.size();
  }
};

bool Glob::Compile(std::string_view pattern, Glob* out, std::string* error) {
  Glob g;
  g.pattern_ = std::string(pattern);
  bool in_prefix = true;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    Op op{};
    if (c == '\\') {
      if (i + 1 >= pattern.size()) {
        *error = "pattern '" + g.pattern_ + "' ends with a lone backslash";
        return false;
      }
      op.kind = Op::kLit;
      op.lit = pattern[++i];
    } else if (c == '*') {
      if (!g.ops_.empty() && g.ops_.back().kind == Op::kAny) continue;  // ** == *
      op.kind = Op::kAny;
    } else if (c == '?') {
      op.kind = Op::kOne;
    } else if (c == '[') {
      size_t j = i + 1;
      bool negate = j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^');
      if (negate) ++j;
      std::bitset<256> cls;
      bool first = true, closed = false;
      while (j < pattern.size()) {
        char a = pattern[j];
        if (a == ']' && !first) {
          closed = true;
          break;
        }
        first = false;
        if (a == '\\' && j + 1 < pattern.size()) a = pattern[++j];
        if (j + 2 < pattern.size() && pattern[j + 1] == '-' && pattern[j + 2] != ']') {
          char b = pattern[j + 2];
          j += 2;
          if (b == '\\' && j + 1 < pattern.size()) b = pattern[++j];
          for (int x = static_cast<unsigned char>(a); x <= static_cast<unsigned char>(b); ++x) cls.set(x);
        } else {
          cls.set(static_cast<unsigned char>(a));
        }
        ++j;
      }
      if (!closed) {
        *error = "pattern '" + g.pattern_ + "' has an unterminated '['";
        return false;
      }
      if (negate) cls.flip();
      op.kind = Op::kClass;
      op.cls = cls;
      i = j;
    } else {
      op.kind = Op::kLit;
      op.lit = c;
    }
    if (op.kind == Op::kLit && in_prefix) {
      g.prefix_.push_back(op.lit);
    } else {
      in_prefix = false;
    }
    g.ops_.push_back(op);
  }
  *out = std::move(g);
  return true;
}

bool Glob::Match(std::string_view text) const {
  if (text.size() < prefix_.size() || text.compare(0, prefix_.size(), prefix_) != 0) return false;
  return GlobOps::Match(ops_, text);
}

std::string EscapeGlob(std::string_view literal) {
  std::string out;
  out.reserve(literal.size() + 8);
  for (char c : literal) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// ---- GlobSet: a trie over the globs' literal prefixes. A lookup walks the
// text down the trie (at most the longest literal prefix, usually a few
// dozen steps) and tries only the globs whose whole literal prefix the text
// starts with, so its cost follows the text and the matching globs, not
// the size of the list.
struct GlobSet::Index {
  struct Node {
    std::vector<std::pair<char, int32_t>> kids;  // byte -> node
    std::vector<int> globs;                      // ascending list positions
  };
  std::vector<Glob> globs;
  std::vector<Node> nodes{1};  // nodes[0]: the root

  int32_t Child(int32_t n, char c) const {
    for (const auto& [k, v] : nodes[n].kids) {
      if (k == c) return v;
    }
    return -1;
  }
};

GlobSet::GlobSet() : index_(std::make_unique<Index>()) {}
GlobSet::~GlobSet() = default;
GlobSet::GlobSet(GlobSet&&) noexcept = default;
GlobSet& GlobSet::operator=(GlobSet&&) noexcept = default;
GlobSet::GlobSet(const GlobSet& o) : index_(std::make_unique<Index>(*o.index_)) {}
GlobSet& GlobSet::operator=(const GlobSet& o) {
  if (this != &o) index_ = std::make_unique<Index>(*o.index_);
  return *this;
}

bool GlobSet::Add(std::string_view pattern, std::string* error) {
  Glob g;
  if (!Glob::Compile(pattern, &g, error)) return false;
  Index& ix = *index_;
  int32_t n = 0;
  for (char c : g.literal_prefix()) {
    int32_t next = ix.Child(n, c);
    if (next < 0) {
      next = static_cast<int32_t>(ix.nodes.size());
      ix.nodes[n].kids.emplace_back(c, next);
      ix.nodes.emplace_back();
    }
    n = next;
  }
  ix.nodes[n].globs.push_back(static_cast<int>(ix.globs.size()));
  ix.globs.push_back(std::move(g));
  return true;
}

int GlobSet::FirstMatch(std::string_view text) const {
  const Index& ix = *index_;
  if (ix.globs.empty()) return -1;
  int best = -1;
  int32_t n = 0;
  size_t depth = 0;
  for (;;) {
    for (int i : ix.nodes[n].globs) {
      if (best >= 0 && i >= best) break;  // ascending: nothing earlier left here
      if (ix.globs[i].Match(text)) {
        best = i;
        break;
      }
    }
    if (depth >= text.size()) break;
    n = ix.Child(n, text[depth++]);
    if (n < 0) break;
  }
  return best;
}

size_t GlobSet::size() const { return index_->globs.size(); }
const Glob& GlobSet::at(size_t i) const { return index_->globs[i]; }

}  // namespace tollgate
