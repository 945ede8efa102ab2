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

// Limits a parse enforces before nlohmann allocates anything: a cheap scan
// of the bytes (nesting outside strings, size) runs first, so a hostile
// document is refused without building it (docs/errors.md, "Parsing").
// Strings, arrays and objects are bounded by the bytes: callers cap those
// (Kafka message size, HTTP payload limit, ingest's max_request_bytes).
struct JsonLimits {
  // Arrays and objects nested deeper are refused (E_JSON_TOO_DEEP). Our own
  // recursive walks (dump, schema validation, canonicalisation) use about
  // one stack frame per level, so this is what keeps them off the guard page.
  int max_depth = 256;
  // Documents larger are refused (E_JSON_TOO_LARGE); 0: no limit.
  size_t max_bytes = 0;
};
// Internal documents (flows, events, exports, files): deep enough for any
// input a stage accepted plus the envelopes around it.
inline constexpr int kMaxJsonDepth = 256;
// What an agent or approver may send (requests, approval responses, HTTP
// bodies): events wrap such a document a few levels deeper, and still parse
// under kMaxJsonDepth.
inline constexpr int kMaxInputJsonDepth = 64;

// Parses `text` as one JSON document under `limits` (default: depth
// kMaxJsonDepth, no size limit). Never throws. Errors: E_INVALID_JSON
// (malformed; names the byte offset), E_JSON_TOO_DEEP, E_JSON_TOO_LARGE,
// E_NUMBER_OUT_OF_RANGE (a number no double holds, e.g. 1e999999). *out is
// left as it was on failure.
Status ParseJson(std::string_view text, Json* out, const JsonLimits& limits = {});
// ParseJson with the limits of untrusted input: depth kMaxInputJsonDepth.
Status ParseInputJson(std::string_view text, Json* out, size_t max_bytes = 0);

}  // namespace tollgate
