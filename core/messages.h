// The messages that move along the pipeline's topics, and the result every
// agent gets back (docs/architecture.md, "Public contract"). Builders only:
// stages and the reconciler use them so that a message re-driven from the
// log is byte-for-byte what the stage would have sent.
#pragma once

#include <string>
#include <string_view>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/message.h"
#include "core/tool_catalog.h"

namespace tollgate {

// Stable error codes of the pipeline (docs/errors.md).
namespace errc {
inline constexpr const char* kInvalidRequest = "E_INVALID_REQUEST";
inline constexpr const char* kRequestTooLarge = "E_REQUEST_TOO_LARGE";
inline constexpr const char* kDuplicateRequest = "E_DUPLICATE_REQUEST";
inline constexpr const char* kRequestLost = "E_REQUEST_LOST";
inline constexpr const char* kPolicyDenied = "E_POLICY_DENIED";
inline constexpr const char* kUnknownTool = "E_UNKNOWN_TOOL";
// A tool's args do not fit its schema (core/tool_args.h), or the tool refuses them.
inline constexpr const char* kInvalidArgs = "E_INVALID_ARGS";
// write_file / delete_file while execute.writes_enabled is false: decide
// denies them (they could not run), execute refuses any that get through.
// The AI Orchestrator seed's name; tollgate's first, E_WRITES_DISABLED, is its alias.
inline constexpr const char* kWritesDisabled = "E_WRITE_DISABLED";
inline constexpr const char* kApprovalDenied = "E_APPROVAL_DENIED";
inline constexpr const char* kApprovalExpired = "E_APPROVAL_EXPIRED";
inline constexpr const char* kWithdrawn = "E_WITHDRAWN";  // the agent withdrew its pending call
// The agent already has as many calls waiting for approval as it may
// (ApproveConfig::max_pending_per_agent): this one ends denied, never held.
inline constexpr const char* kTooManyPending = "E_TOO_MANY_PENDING";
inline constexpr const char* kToolExec = "E_TOOL_EXEC";
inline constexpr const char* kOutcomeUnknown = "E_OUTCOME_UNKNOWN";
// A read-only call that started but never completed (the process stopped
// while it ran): not run again, in case the call is what stopped it.
inline constexpr const char* kExecutionInterrupted = "E_EXECUTION_INTERRUPTED";
inline constexpr const char* kInternal = "E_INTERNAL";
// A message on an internal topic about a request the log does not hold.
inline constexpr const char* kNotInLog = "E_NOT_IN_LOG";
// A message on an internal topic whose content differs from the log's.
inline constexpr const char* kFlowMismatch = "E_FLOW_MISMATCH";
// An output of a request (a flow, a result) larger than the bus carries
// (kMaxMessageBytes): the request ends with this instead of being retried.
inline constexpr const char* kOutputTooLarge = "E_OUTPUT_TOO_LARGE";
// A decision whose invocation or subject is over kMaxInvocationBytes: denied.
inline constexpr const char* kInvocationTooLarge = "E_INVOCATION_TOO_LARGE";
// The AI Orchestrator seed's file, audit and calculate codes (docs/errors.md).
// Not found: recoverable wherever they are made (SeedRecoverable).
inline constexpr const char* kDirNotFound = "E_DIR_NOT_FOUND";    // a directory on the path is missing
inline constexpr const char* kPathNotFound = "E_PATH_NOT_FOUND";  // a component is a file, not a directory
inline constexpr const char* kPermission = "E_PERMISSION";        // the OS said EACCES / EPERM
inline constexpr const char* kInvalidPath = "E_INVALID_PATH";     // empty, NUL, names no file
inline constexpr const char* kReadError = "E_READ_ERROR";
inline constexpr const char* kWriteError = "E_WRITE_ERROR";
inline constexpr const char* kListError = "E_LIST_ERROR";
inline constexpr const char* kSearchError = "E_SEARCH_ERROR";
inline constexpr const char* kAuditError = "E_AUDIT_ERROR";
inline constexpr const char* kCalcError = "E_CALC_ERROR";
}  // namespace errc

// The name tollgate gave a condition before a seed named it `code`
// (E_WRITE_DISABLED -> E_WRITES_DISABLED, ...; docs/errors.md "Aliases"), or
// nullptr when `code` has none. Old callers match error.alias.
const char* ErrorAlias(std::string_view code);
// Whether a seed calls `code` recoverable whoever makes it (E_FILE_NOT_FOUND,
// E_DIR_NOT_FOUND, E_PATH_NOT_FOUND).
bool SeedRecoverable(std::string_view code);

// Header names: core/message.h.

// IsFileTool (the built-ins that act on one workspace path): core/tool_catalog.h.

// ToolResult: {success, data, error: {code, message, recoverable, alias?} | null, meta: {duration_ms, ...}}.
// ToolResultError sets error.alias to ErrorAlias(code) when there is one, and
// recoverable when the seed says so (SeedRecoverable).
Json ToolResultOk(Json data, double duration_ms);
Json ToolResultError(const std::string& code, const std::string& message, bool recoverable,
                     double duration_ms = 0);
// The same with an explicit alias (the old code, when it depended on the
// call, e.g. E_AUDIT_ERROR for what was the log's own code); "" = none.
Json ToolResultErrorAs(const std::string& code, const std::string& alias, const std::string& message,
                       bool recoverable);

// The flow message on the decide, approve and execute topics:
// {"request": <normalised request, args NOT redacted>, "received_at": "...",
//  "args_hash": "<hex>", "decision": {...} (from decide on)}.
// `request` holds request_id, org_id, agent_id, session_id, tool, args and the
// optional action, estimated_cost_usd, metadata.
struct Flow {
  Json request;
  std::string received_at;
  std::string args_hash;
  Json decision;  // null before decide
  Json ToJson() const;
  static bool FromJson(const Json& j, Flow* out);
  std::string request_id() const { return request.value("request_id", ""); }
  std::string agent_id() const { return request.value("agent_id", ""); }
};

// The result published on tollgate.results. `decision` and `approval` may be
// null; log_seq is filled in by the stage runner.
Json MakeResult(const Json& request, const std::string& status, const Json& decision, const Json& approval,
                const Json& tool_result);

// A message for `topic` keyed by the request's agent_id with the standard
// headers. The trace id is the request's metadata.trace_id when given, else
// the request id.
Message MessageFor(const std::string& topic, const Json& request, const Json& value);
// Sets "log_seq" in a message value that is a JSON object (as MessageFor
// makes them) once the event it refers to is appended; other values are
// left as they are.
void SetLogSeq(Message* m, uint64_t seq);

// The one builder of a request.rejected that ends a known request: filed
// under the request's (org, agent, session, request_id, tool) as `request`
// names them (strings), id from (org, request, `discriminator`) so doing it
// again appends nothing new, data {error: {code, message}, source}. Callers
// add their own data fields. (Unproven messages are refused under org
// "unknown" by core/unproven.h instead.)
Event RequestRejectedEvent(const Json& request, const std::string& code, const std::string& message,
                           const std::string& discriminator, const std::string& source, int64_t now_us);

// Ends the request an output belongs to when that output cannot be sent
// (larger than `limit`, the producer's): *event is a request.rejected with
// E_OUTPUT_TOO_LARGE (final for the request, core/request_state.h) and
// *result the agent's error result in place of the output. `source` is
// what the output was made from (the event id's discriminator, so doing it
// again appends nothing new). False when `output` names no request (not a
// flow or a result).
bool EndRequestForOversizeOutput(const Message& output, const Topics& topics, const std::string& stage,
                                 const std::string& source, int64_t now_us, Event* event, Message* result,
                                 size_t limit = kMaxMessageBytes);

// Caps on what a decision copies from a request (docs/errors.md,
// E_INVOCATION_TOO_LARGE).
// An invocation (URL, command line) or subject (TOOL:PATH) longer than this
// is denied: no tool needs one (URLs past 8 KiB and single arguments past
// 128 KiB fail elsewhere anyway), and a decision carrying it would make
// every message and event of the request that large.
inline constexpr size_t kMaxInvocationBytes = 64 << 10;
// Free text a decision carries (reason, each check's detail): truncated.
inline constexpr size_t kMaxReasonBytes = 4 << 10;
inline constexpr size_t kMaxCheckDetailBytes = 1 << 10;
inline constexpr size_t kMaxDecisionChecks = 64;

// `text` cut to at most `max` bytes at a UTF-8 character boundary, marked
// as cut ("…[N bytes cut]") when it was.
std::string TruncateUtf8(std::string_view text, size_t max);

// Applies the caps above to decision.made data as the policy engine made
// it: an invocation or subject over kMaxInvocationBytes turns the decision
// into a deny with E_INVOCATION_TOO_LARGE (no reservation, no approval;
// the invocation kept only as a truncated prefix); reasons and check
// details are truncated. A decision within the caps is left as it is.
// Returns whether it changed anything.
bool BoundDecision(Json* decision);

// SHA-256 hex of the canonical JSON of `args`.
std::string ArgsHash(const Json& args);

}  // namespace tollgate
