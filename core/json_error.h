// What the JSON library throws, in the project's own words: which field,
// what was expected, what was found. Every message that reaches a person
// (an HTTP answer, a CLI line, a request.rejected, a tool result) goes
// through here rather than printing the library's
// "[json.exception.type_error.302] ..." (docs/errors.md, "Parsing").
// Never quotes a document's string values (they may be secrets). Pure.
#pragma once

#include <string>

#include "core/canonical_json.h"

namespace tollgate {

// The largest magnitude a JSON number may have here: numbers are read as
// 64-bit floats (or 64-bit integers when whole), so 1e999 is refused.
inline constexpr const char* kJsonNumberRange =
    "a finite 64-bit float, magnitude at most 1.7976931348623157e308";

// One clause for `e`, any exception nlohmann::json throws:
//  - a parse error: "malformed JSON at line 1, column 6: unexpected end of
//    input; expected ']'" (what it read there is never echoed);
//  - a number overflow: "a number is out of range (JSON numbers must be
//    <kJsonNumberRange>)";
//  - a value of the wrong type: "/comment: expected a string, got a number"
//    when `doc` (the document that was being read, may be null) has
//    exactly one field of that type, "one of /a, /b: ..." for a few, else
//    "a field has the wrong type: expected a string, got a number";
//  - a missing key: "missing required field 'x'";
//  - anything else: the library's clause without its "[json.exception...]"
//    tag.
std::string JsonErrorText(const Json::exception& e, const Json* doc = nullptr);

}  // namespace tollgate
