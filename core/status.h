// Status: the result of an operation that can fail, LevelDB-style.
//
// A Status is either ok() or carries a stable error code (the E_* strings of
// docs/architecture.md and docs/errors.md) plus a message for humans. Codes are
// part of the public contract: callers branch on code(), people read
// message(). Status is a cheap value type; it is not thread-safe to mutate one
// instance from several threads, like any std::string.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace tollgate {

class Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  static Status Error(std::string code, std::string message) {
    Status s;
    s.code_ = std::move(code);
    s.message_ = std::move(message);
    return s;
  }

  bool ok() const { return code_.empty(); }
  // Empty when ok().
  const std::string& code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "E_CODE: message".
  std::string ToString() const { return ok() ? "OK" : code_ + ": " + message_; }

 private:
  std::string code_;
  std::string message_;
};

// Stable error codes used by core/ and audit/. Stages add their own (see
// docs/errors.md); keep this list and that document in step.
namespace errc {
inline constexpr const char* kInvalidJson = "E_INVALID_JSON";
// Parse limits (core/canonical_json.h): nesting, size, number range.
inline constexpr const char* kJsonTooDeep = "E_JSON_TOO_DEEP";
inline constexpr const char* kJsonTooLarge = "E_JSON_TOO_LARGE";
inline constexpr const char* kNumberOutOfRange = "E_NUMBER_OUT_OF_RANGE";
inline constexpr const char* kInvalidEvent = "E_INVALID_EVENT";
inline constexpr const char* kUnknownEventType = "E_UNKNOWN_EVENT_TYPE";
inline constexpr const char* kEventTooLarge = "E_EVENT_TOO_LARGE";
inline constexpr const char* kInvalidUtf8 = "E_INVALID_UTF8";
inline constexpr const char* kSchemaViolation = "E_SCHEMA_VIOLATION";
inline constexpr const char* kInvalidQuery = "E_INVALID_QUERY";
inline constexpr const char* kForbidden = "E_FORBIDDEN";
inline constexpr const char* kNotFound = "E_NOT_FOUND";
inline constexpr const char* kIdConflict = "E_EVENT_ID_CONFLICT";
inline constexpr const char* kLogIO = "E_LOG_IO";
inline constexpr const char* kLogClosed = "E_LOG_CLOSED";
inline constexpr const char* kLogCorrupt = "E_LOG_CORRUPT";
inline constexpr const char* kChainBroken = "E_CHAIN_BROKEN";
inline constexpr const char* kIndexMismatch = "E_INDEX_MISMATCH";
inline constexpr const char* kExportInvalid = "E_EXPORT_INVALID";
// execute: the invocation recomputed from the args is not the decision's
// (execute/invocation_check.h); nothing runs.
inline constexpr const char* kDecisionMismatch = "E_DECISION_MISMATCH";
}  // namespace errc

}  // namespace tollgate
