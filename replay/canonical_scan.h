// A strict single pass over a JSON object in canonical form
// (core/canonical_json.h), without building a tree: for re-decision, which
// compares a recorded decision's canonical bytes with the re-made
// decision's and parses the recorded one only when they differ.
//
// Strict: it accepts only text that nlohmann's parser also accepts (and
// parses to the same value) — plain JSON with top-level keys in strictly
// increasing byte order and no whitespace, well-formed UTF-8, no \u escape
// of a surrogate, numbers of bounded size, nesting at most 64 deep. False
// means "parse it instead", never "it is bad".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/canonical_json.h"

namespace tollgate::replay {

// One top-level member of an object: `member` is the bytes `"key":value`.
struct CanonicalMember {
  std::string_view key;     // without the quotes (top-level keys never hold an escape)
  std::string_view member;  // "key":value
  std::string_view value;   // value
};

// Splits `object` into its top-level members, validating all of it.
bool ScanCanonicalObject(std::string_view object, std::vector<CanonicalMember>* out);

// `object`'s members whose key is in `keys` (a null-terminated list), as
// the canonical bytes of the object of those members alone: what
// CanonicalBytes() gives for the object with every other key removed.
// False when ScanCanonicalObject would be.
bool CanonicalSubset(std::string_view object, const char* const* keys, std::string* out);

// Parses `object` into *out without nlohmann's lexer: the value
// ParseJson(object) gives. Takes only what ScanCanonicalObject accepts, with
// the keys of every object (not only the top level) strictly increasing and
// no escape in any string; false (and *out unspecified) means "use
// ParseJson instead", never "it is bad".
bool ParseCanonicalObject(std::string_view object, Json* out);

}  // namespace tollgate::replay
