// Globs, as deny, allow and notify lists and tool names use them
// (docs/policy.md, "Patterns"): "type:pattern" matched against the whole
// invocation string. Compiled once when a policy loads; Match and
// FirstMatch only read, so a compiled Glob or GlobSet is safe to share.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

// `*` any run of characters (including '/' and ':'), `?` one character,
// `[abc]`, `[a-z]`, `[!x]` classes, `\x` the literal x. Matching is on bytes
// and case-sensitive.
class Glob {
 public:
  // False (and *error says why) on an unterminated class or trailing '\'.
  static bool Compile(std::string_view pattern, Glob* out, std::string* error);
  bool Match(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }
  // The literal bytes every match starts with (used to index glob sets).
  const std::string& literal_prefix() const { return prefix_; }

 private:
  struct Op {
    enum Kind : uint8_t { kLit, kAny, kOne, kClass } kind = kLit;
    char lit = 0;
    std::bitset<256> cls;  // kClass: the bytes it accepts
  };
  std::string pattern_;
  std::string prefix_;
  std::vector<Op> ops_;
  friend struct GlobOps;
};

// `pattern` with the glob metacharacters * ? [ ] \ escaped by a backslash,
// so that it matches exactly `literal` (the contract's "allow always" rule).
std::string EscapeGlob(std::string_view literal);

// A list of globs indexed by literal prefix (a trie): a lookup walks the
// text down the trie and tries only the globs whose literal prefix the text
// starts with, not a scan of the list. Reports the first glob (in list
// order) that matches.
class GlobSet {
 public:
  GlobSet();
  ~GlobSet();
  GlobSet(GlobSet&&) noexcept;
  GlobSet& operator=(GlobSet&&) noexcept;
  GlobSet(const GlobSet&);
  GlobSet& operator=(const GlobSet&);

  // Appends; false with *error on a bad pattern.
  bool Add(std::string_view pattern, std::string* error);
  // Index in list order of the first matching glob, or -1.
  int FirstMatch(std::string_view text) const;
  size_t size() const;
  const Glob& at(size_t i) const;

 private:
  struct Index;
  std::unique_ptr<Index> index_;
};

}  // namespace tollgate
