// The event envelope: one entry of the tollgate event log.
//
// Every stage describes what it did as Events; the log (audit/) assigns seq,
// prev_hash and hash on append. The *body* of an event is every envelope field
// except prev_hash and hash (so it includes seq); its canonical JSON is what
// the hash chain covers (docs/log_format.md). Value type; not synchronised.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

// The event vocabulary (docs/log_format.md, docs/architecture.md); schemas/
// is normative for data. Code names a type by its constant, never a literal.
namespace ev {
inline constexpr const char* kRequestReceived = "request.received";
inline constexpr const char* kRequestRejected = "request.rejected";
inline constexpr const char* kDecisionMade = "decision.made";
inline constexpr const char* kApprovalRequested = "approval.requested";
inline constexpr const char* kApprovalGranted = "approval.granted";
inline constexpr const char* kApprovalDenied = "approval.denied";
inline constexpr const char* kApprovalExpired = "approval.expired";
inline constexpr const char* kApprovalRefused = "approval.refused";
inline constexpr const char* kExecutionStarted = "execution.started";
inline constexpr const char* kExecutionCompleted = "execution.completed";
inline constexpr const char* kPolicyUpdated = "policy.updated";
inline constexpr const char* kPolicyRefused = "policy.refused";
inline constexpr const char* kCredentialAdded = "credential.added";
inline constexpr const char* kCredentialRevoked = "credential.revoked";
inline constexpr const char* kToolsAvailable = "tools.available";
inline constexpr const char* kCheckpointSigned = "checkpoint.signed";
}  // namespace ev
inline constexpr std::string_view kEventTypes[] = {
    ev::kRequestReceived,    ev::kRequestRejected, ev::kDecisionMade,    ev::kApprovalRequested,
    ev::kApprovalGranted,    ev::kApprovalDenied,  ev::kApprovalExpired, ev::kExecutionStarted,
    ev::kExecutionCompleted, ev::kPolicyUpdated,   ev::kApprovalRefused, ev::kCredentialAdded,
    ev::kCredentialRevoked,  ev::kToolsAvailable,  ev::kPolicyRefused,   ev::kCheckpointSigned,
};
bool IsKnownEventType(std::string_view type);
// The org of events about the whole deployment (policy.updated of the file
// tier, tools.available, policy.refused).
inline constexpr const char* kAllOrgs = "*";

// Limits that keep one event from swamping the log or a reader.
inline constexpr size_t kMaxIdBytes = 256;                // every id-like field
inline constexpr size_t kDefaultMaxEventBytes = 1 << 20;  // canonical body

struct Event {
  uint64_t seq = 0;     // assigned by the log; 0 = not yet appended
  std::string id;       // deterministic (MakeEventId); the dedupe key
  std::string type;     // one of kEventTypes
  int64_t time_us = 0;  // microseconds since the Unix epoch, UTC
  std::string org_id;
  std::string agent_id;
  std::string session_id;  // may be empty (e.g. policy.updated)
  std::string request_id;  // may be empty (e.g. policy.updated)
  std::string tool;        // may be empty
  Json data = Json::object();
  // Completeness links (docs/log_format.md, "Links"), assigned by the log
  // like seq: the seq of the previous event of the same (org_id,
  // request_id) and of the same (org_id, session_id), 0 for the first.
  // Absent on an event without that id and on events logged before links.
  std::optional<uint64_t> prev_in_request;  // "seq_prev_request"
  std::optional<uint64_t> prev_in_session;  // "seq_prev_session"
  std::string prev_hash;                    // hex; assigned by the log
  std::string hash;                         // hex; assigned by the log

  // The envelope minus prev_hash/hash, as a JSON object.
  Json BodyJson() const;
  // The full record as exported and returned by queries.
  Json RecordJson() const;
};

// `data` without the fields that say where an event came from rather than
// what it says: "source" (the input it was made from) and "traceparent"
// (the request's trace, core/trace.h). A decision or an approval as results
// and flows carry it.
Json WithoutProvenance(Json data);

// Checks the envelope: known type, id-like fields present where required,
// at most kMaxIdBytes and free of control characters (the index key
// separator is NUL), data an object. Errors name the field.
Status ValidateEnvelope(const Event& e);

// Parses and validates an event body or full record. Unknown envelope fields
// are refused (E_INVALID_EVENT) so that nothing the hash covers is dropped.
// seq/prev_hash/hash are read when present.
Status EventFromJson(const Json& j, Event* out);
Status EventFromText(std::string_view text, Event* out);

// Validates `e` and writes its canonical body bytes (with e.seq);
// E_EVENT_TOO_LARGE past max_bytes.
Status EncodeEventBody(const Event& e, size_t max_bytes, std::string* out);

// The canonical body split around what the log assigns, so that it can be
// serialised before: body = head + decimal(seq) + links + tail. (Keys are
// sorted; "seq", "seq_prev_request" and "seq_prev_session" fall together
// between "request_id" and "session_id".)
struct EventBodyParts {
  std::string head;
  std::string links;  // LinksText of the event's links
  std::string tail;
  std::string Join(uint64_t seq) const { return head + std::to_string(seq) + links + tail; }
};
// `,"seq_prev_request":N` and `,"seq_prev_session":M`, each when present.
std::string LinksText(std::optional<uint64_t> prev_in_request, std::optional<uint64_t> prev_in_session);
// As EncodeEventBody; the size limit allows for a 20-digit seq.
Status SplitEventBody(const Event& e, size_t max_bytes, EventBodyParts* out);

// The envelope of a canonical event body, found by a single pass over the
// bytes without building a JSON tree: for readers (audit queries) that filter
// on the envelope and hand records on as JSON. Views point into the body.
struct EnvelopeView {
  uint64_t seq = 0;
  std::optional<uint64_t> prev_in_request, prev_in_session;
  std::string_view agent_id, data, id, org_id, request_id, session_id, time, tool, type;
  size_t id_key_at = 0;          // offset of the "id" key's opening quote
  size_t request_id_key_at = 0;  // offset of the "request_id" key's opening quote
};
// True when `body` has exactly the layout EncodeEventBody writes: the ten
// envelope keys (and the links present) in sorted order, no whitespace, string fields without escape
// sequences. `data` is skipped by bracket matching, not validated. False
// means "decode it with EventFromText instead", never "the event is bad".
bool ScanEnvelope(std::string_view body, EnvelopeView* out);
// The canonical bytes of the full record (body plus "hash" and "prev_hash"),
// identical to CanonicalBytes(RecordJson()) of the decoded event. `view`
// must come from ScanEnvelope(body).
std::string RecordText(std::string_view body, const EnvelopeView& view, std::string_view prev_hash_hex,
                       std::string_view hash_hex);

// Deterministic event id: the first 32 hex digits of
// SHA-256("tollgate.event.v1" NUL type NUL request_id NUL discriminator).
// The same step of the same request always yields the same id, so
// re-processing after a crash appends nothing new. `discriminator` tells
// apart several events of one type for one request (an approver, an attempt).
std::string MakeEventId(std::string_view type, std::string_view request_id,
                        std::string_view discriminator = {});
// The id of an event about a request. request_ids are the agents' own and
// scoped by org (two orgs may use the same one), so the org is part of the
// id: one org's events can never collide with, or de-duplicate, another's.
std::string MakeRequestEventId(std::string_view org_id, std::string_view type, std::string_view request_id,
                               std::string_view discriminator = {});
// The key of one request across the pipeline: org NUL request_id (ids are
// free of control characters, so the NUL cannot be forged).
std::string RequestKey(std::string_view org_id, std::string_view request_id);

// RFC 3339 UTC with exactly six fractional digits: 2026-11-22T10:40:24.123456Z.
std::string FormatTime(int64_t time_us);
// Accepts RFC 3339 with Z or a numeric offset and 0-9 fractional digits.
bool ParseTime(std::string_view text, int64_t* time_us);
int64_t NowMicros();

}  // namespace tollgate
