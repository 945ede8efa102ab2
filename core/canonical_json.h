// Canonical JSON: the exact bytes the event hash covers.
//
// Form (docs/log_format.md, "Canonical bytes"): object keys sorted by their
// UTF-8 bytes, no insignificant whitespace, strings as UTF-8 with only the
// escapes JSON requires (\" \\ \b \f \n \r \t, \u00XX for other control
// characters), integers in decimal, non-integers in the shortest form that
// round-trips. Parsing canonical bytes and dumping them again yields the same
// bytes, which is what lets an auditor re-hash an export offline.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/status.h"

namespace tollgate {

using Json = nlohmann::json;

// Writes the canonical form of `value` to *out. Fails with E_INVALID_UTF8 on
// strings that are not valid UTF-8 and E_INVALID_JSON on NaN or infinity
// (which JSON cannot represent). *out is unspecified on failure.
Status CanonicalBytes(const Json& value, std::string* out);

// `text` with every byte sequence that is not valid UTF-8 replaced by U+FFFD,
// so that text quoting untrusted input (an error message) can be logged.
std::string ToValidUtf8(std::string_view text);

// Parses `text` as one JSON document. E_INVALID_JSON names the byte offset.
Status ParseJson(std::string_view text, Json* out);

}  // namespace tollgate
