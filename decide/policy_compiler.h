// Compiling a policy document (already schema-valid JSON) into
// Policy::Compiled (decide/compiled_policy.h), and naming the place in the
// file an error is about. Internal to decide: the loader
// (decide/policy_loader.cpp) is its one caller. Pure.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/canonical_json.h"
#include "core/status.h"
#include "decide/policy_loader.h"

namespace tollgate {

// Where a value of the document is in the YAML (1-based, yaml-cpp's Mark),
// and for a mapping's entry where its key is (0 for list items and the
// root). `policy check` places an unknown field at its key.
struct SourceMark {
  int line = 0;
  int column = 0;
  int key_line = 0;
  int key_column = 0;
};
// A JSON pointer of the document -> where in the YAML it came from (empty
// for a policy given as JSON).
using LineMap = std::map<std::string, SourceMark>;
// Where the values of an org's effective document came from: a pointer of
// the merged document -> the pointer in the file it was taken from (a
// subtree maps with it; a pointer with no mapped ancestor is the same
// place in the file). docs/policy.md, "Organisations".
using Origins = std::map<std::string, std::string>;

// `key` escaped as one JSON pointer token ('~' -> "~0", '/' -> "~1").
std::string PointerToken(const std::string& key);
// The mark of `ptr`, else of its deepest ancestor `lines` knows; all zero
// when none (`lines` may be null).
SourceMark MarkOf(const LineMap* lines, std::string ptr);
// "line N: " for the deepest known ancestor of `ptr`, or "at PTR: " (""
// for the root). `lines` may be null.
std::string Where(const LineMap* lines, std::string ptr);

// YAML text to JSON with the line of every JSON pointer (the loader's
// reader: duplicate keys, alias bombs and depth refused with a line).
Status ParsePolicyYaml(std::string_view text, Json* doc, LineMap* lines);
// Validates and compiles an already parsed document (LoadPolicyYaml's
// second half): what the Duragent layout (decide/duragent_policy.h) uses.
Status LoadPolicyDocument(const Json& doc, const std::string& source, const LineMap* lines, PolicyPtr* out);

// Compiles `doc` (the deployment's document, or an org's effective one
// with `origins` mapping its pointers back to the file; may be null) into
// *out. E_POLICY_INVALID naming the place (via `lines`, may be null) on
// what the schema cannot catch: bad globs, unknown levels, windows or
// approver groups, unreachable quorums. May throw on a document the schema
// should have refused; the loader catches that. *failed_at (optional) is
// then the pointer in the file the error is about.
Status CompilePolicy(const Json& doc, const LineMap* lines, const Origins* origins, Policy::Compiled* out,
                     std::string* failed_at = nullptr);

}  // namespace tollgate
