// The approve stage: holds the requests decide answered `ask` until enough
// approvers clear them, someone denies them, or their deadline passes
// (docs/approvals.md).
//
// Inputs: the approve topic (Flow messages whose decision is `ask`) and the
// approval-responses topic (schemas/approval_response.schema.json, written by
// `tollgate approvals` and the HTTP API). The stage reads nothing of the
// policy: it enforces exactly the decision's `approval` block
// ({quorum, approvers, timeout_s}, docs/policy.md) as the log records it.
//
// - ask: appends approval.requested (approvers_needed = quorum, approvers,
//   timeout_s, deadline = the decision.made time + timeout_s, the logged
//   args_hash) and holds the request. When its agent already has
//   max_pending_per_agent approvals pending (the fold below, plus the asks
//   held earlier in the same batch), appends an approval.denied with
//   code E_TOO_MANY_PENDING instead and sends the `denied` result.
// - response: judged against the request's events in the log (the runner
//   overlays the batch in progress, so two responses in one batch see each
//   other). Refused, as an approval.refused event with a reason code, when
//   malformed, for an unknown or settled request, late, with another args
//   hash, from an approver not in `approvers` (when not empty), or a second
//   grant by the same approver. Otherwise approval.granted (one per distinct
//   approver) or approval.denied. The grant that completes the quorum
//   forwards the Flow, with an `approval` object, to execute; when every
//   counted grant has scope `always`, a policy.updated adds the call's
//   invocation to the agent-local tier (AllowAlwaysEvent). A denial sends a
//   `denied` result (E_APPROVAL_DENIED).
// - Tick: a pending request past its deadline gets approval.expired and an
//   `expired` result (E_APPROVAL_EXPIRED), whether or not a message arrives.
// Webhooks to approvers are not the stage's: an observer of the log sends
// them (observe/approval_webhooks.h).
//
// Derived state: the pending approvals (approve/pending_approvals.h: their
// deadlines, for Tick) and the flows seen on the approve topic (they carry
// the unredacted args that execute needs). Restore() folds the log at
// start; OnAppended() keeps it current (core/stage.h: the host does both);
// both apply the same fold, which is idempotent. Decisions themselves
// always come from the log view, so the state only says *when* to look. A
// message read again after a crash re-emits what it produced.
//
// Links the contract only (no RocksDB, no Kafka): Load() takes a walk over
// events, such as audit/approvals.h's ApprovalEvents(store).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "approve/pending_approvals.h"
#include "core/credentials.h"
#include "core/flow_stage.h"

namespace tollgate {

// Reason codes of approval.refused (docs/errors.md).
namespace approve_errc {
inline constexpr const char* kInvalidResponse = "E_INVALID_RESPONSE";
inline constexpr const char* kUnknown = "E_APPROVAL_UNKNOWN";
inline constexpr const char* kSettled = "E_APPROVAL_SETTLED";
inline constexpr const char* kArgsHashMismatch = "E_ARGS_HASH_MISMATCH";
inline constexpr const char* kNotEntitled = "E_APPROVER_NOT_ENTITLED";
inline constexpr const char* kDuplicate = "E_APPROVAL_DUPLICATE";
inline constexpr const char* kUnauthenticated = "E_UNAUTHENTICATED";
}  // namespace approve_errc

// Who sent an approval response, as its signature proves (never its own
// "approver" field): an approver identity, its org ("*" = a deployment-wide
// admin, who must then name the request's org in the response's org_id).
struct ApproverIdentity {
  std::string identity;
  std::string org_id;
  // Signed as an agent (its key, or the service key on its behalf): such a
  // response may only withdraw that agent's own pending call.
  bool agent = false;
};
// Authenticates a response message at `now_us` (docs/trust.md: its
// tollgate-auth header). False with *why when it cannot: the response is
// then refused (E_UNAUTHENTICATED) and counts for nothing. When only the
// signature's time failed, *who is still filled in (so a message read again
// after a crash is recognised). Must be thread-safe.
using ResponseAuthenticator =
    std::function<bool(const Message& in, int64_t now_us, ApproverIdentity* who, std::string* why)>;

inline constexpr int64_t kDefaultApprovalTimeoutS = 900;

// The authenticator of the deployment: AuthenticateResponse (core/auth.h)
// against `registry` (which must outlive it), signatures at most
// `max_skew_us` from the clock.
ResponseAuthenticator RegistryAuthenticator(const CredentialRegistry* registry, int64_t max_skew_us);

struct ApproveConfig {
  Topics topics;
  // Unset: every response is refused (fail closed).
  ResponseAuthenticator authenticate;
  // Calls of one (org, agent) waiting for approval at once; an ask past it
  // ends `denied` with E_TOO_MANY_PENDING (an approval.denied by approver
  // "tollgate" with `code`), never shown to approvers. 0: no cap.
  size_t max_pending_per_agent = 100;
};

// `text` with the glob metacharacters * ? [ ] \ escaped by a backslash.
std::string EscapeGlob(const std::string& text);

// The policy.updated that "allow always" appends (contracts file): the rule
// allows `invocation` (escaped) for the request's org and agent.
Event AllowAlwaysEvent(const Event& request_event, const std::string& invocation, const std::string& approver,
                       int64_t time_us);

class ApproveStage : public Stage {
 public:
  explicit ApproveStage(ApproveConfig config);
  ~ApproveStage() override;
  std::string name() const override { return "approve"; }
  std::vector<std::string> input_topics() const override {
    return {config_.topics.approve(), config_.topics.approval_responses()};
  }
  std::vector<std::string> output_topics() const override {
    return {config_.topics.execute(), config_.topics.results()};
  }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;
  StageResult Tick(const StageContext& ctx, const LogView& log) override;

  // Visits events in log order (each request's in seq order); returns the
  // first read error.
  using EventWalk = std::function<Status(const std::function<void(const Event&)>& visit)>;
  // Folds the pending approvals of the events `walk` visits (at start,
  // before the runner): the whole log, or only the requests with an
  // approval.requested (ApprovalEvents, audit/approvals.h).
  Status Load(const EventWalk& walk);
  // Restore (core/stage.h): Load over the log's open approvals.
  Status Restore(const LogHistory& history) override;
  // Folds every appended group (pending approvals, flows to forget).
  void OnAppended(const std::vector<Event>& events) override;

  size_t pending() const;
  // The earliest pending deadline, 0 when nothing is pending.
  int64_t next_deadline_us() const;

 private:
  StageResult ProcessAsk(const Message& in, const StageContext& ctx, const LogView& log);
  StageResult ProcessResponse(const Message& in, const StageContext& ctx, const LogView& log);
  // ProcessResponse's steps, in the order they run (the .cpp).
  struct Response;
  Status ReadResponse(const LogView& log, Response& x);
  bool ReemitProcessed(Response& x);
  StageResult Refuse(Response& x, const std::string& code, const std::string& message);
  std::optional<StageResult> RefuseResponder(Response& x);
  std::optional<StageResult> RefuseOutOfState(Response& x);
  std::optional<StageResult> ExpireIfLate(Response& x);
  StageResult Withdraw(Response& x);
  std::optional<StageResult> RefuseUnentitled(Response& x);
  StageResult RecordAnswer(Response& x);
  // An ask past its agent's max_pending_per_agent: its approval.denied
  // (E_TOO_MANY_PENDING) and `denied` result into *r; false under the cap.
  bool DenyOverPendingCap(const FlowInput& input, const StageContext& ctx, StageResult* r);
  // Outputs for the event `settled` that ended the approval.
  void Settle(const std::vector<Event>& history, const Event& settled, bool fresh, StageResult* r);
  // The Flow to forward for a granted request: the one seen on the approve
  // topic, else rebuilt from the log; false when the log's copy is redacted.
  bool FlowFor(const std::vector<Event>& history, Flow* flow) const;

  ApproveConfig config_;
  mutable std::mutex mu_;
  PendingApprovals pending_;  // guarded by mu_
  // Keyed by RequestKey(org, request_id): request ids are per org.
  std::map<std::string, Flow> flows_;  // flow from the approve topic; guarded by mu_
};

}  // namespace tollgate
