#include "approve/approve_stage.h"

#include <algorithm>

#include "core/auth.h"
#include "core/messages.h"
#include "core/result_signature.h"
#include "core/schema.h"
#include "core/sha256.h"
#include "core/trace.h"
#include "core/unproven.h"

namespace tollgate {
namespace {

constexpr const char* kTickSource = "approve:tick";
// The approver an approval.denied of the stage's own names (the pending cap).
constexpr const char* kCapApprover = "tollgate";

bool IsId(const std::string& s) {
  if (s.empty() || s.size() > kMaxIdBytes) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// An event about the request of `history` (its envelope from the first
// event that has one), or about an unknown request.
Event EventAbout(const std::vector<Event>& history, const std::string& rid, const std::string& type,
                 int64_t time_us, Json data, const std::string& discriminator) {
  // About a request: its org's. About nothing the log knows (a refused
  // response): org "unknown", so nobody writes into another org's history.
  Event e;
  const Event* like = nullptr;
  for (const Event& h : history) {
    if (h.type == ev::kRequestReceived) like = &h;
  }
  if (!like && !history.empty()) like = &history.front();
  if (like) {
    e.org_id = like->org_id;
    e.agent_id = like->agent_id;
    e.session_id = like->session_id;
    e.tool = like->tool;
  } else {
    e.org_id = e.agent_id = e.session_id = "unknown";
  }
  e.type = type;
  e.request_id = rid;
  e.id = MakeRequestEventId(e.org_id, type, rid, discriminator);
  e.time_us = time_us;
  e.data = std::move(data);
  // In the request's trace, not that of the response (or tick) that made it.
  StampTraceparent(RequestTraceparent(history), &e);
  return e;
}

Message InTrace(const std::string& traceparent, Message m) {
  StampTraceparent(traceparent, &m);
  return m;
}

Json RequestOf(const RequestState& st, const Event& any) {
  if (st.received) return st.received->data.value("request", Json::object());
  return {{"request_id", any.request_id},
          {"org_id", any.org_id},
          {"agent_id", any.agent_id},
          {"session_id", any.session_id},
          {"tool", any.tool}};
}

// The withdrawal by (org, agent) that reached the stage before its request
// was held (the MCP gateway withdraws the moment its client gives up),
// refused then as E_APPROVAL_UNKNOWN: in the request's own history, or,
// when the request was not in the log yet, under org "unknown" naming the
// agent's org (`approver_org`). The ask that finds it is never put to
// approvers.
const Event* EarlyWithdrawal(const std::vector<Event>& history, const std::string& org,
                             const std::string& agent) {
  for (const Event& e : history) {
    if (e.type == ev::kApprovalRefused && e.data.value("decision", "") == "withdraw" &&
        e.data.value("code", "") == approve_errc::kUnknown && e.data.value("approver", "") == agent &&
        (e.org_id == org || e.data.value("approver_org", "") == org))
      return &e;
  }
  return nullptr;
}

// The ask of `input` withdrawn before it was held: *out, the approval.denied
// that ends it (withdrawn, by its agent), and *found; the request's own
// history is looked at first, then the refusals under org "unknown".
Status EarlyWithdrawn(const FlowInput& input, const StageContext& ctx, const LogView& log, Event* out,
                      bool* found) {
  const Flow& flow = input.flow;
  const std::string org = flow.request.value("org_id", ""), agent = flow.request.value("agent_id", "");
  const Event* w = EarlyWithdrawal(input.history, org, agent);
  std::vector<Event> unknown;
  if (w == nullptr) {
    if (Status s = log.EventsOfRequest("unknown", flow.request_id(), &unknown); !s.ok()) return s;
    w = EarlyWithdrawal(unknown, org, agent);
  }
  *found = w != nullptr;
  if (!*found) return Status::Ok();
  *out = FlowEvent(flow, ev::kApprovalDenied, ctx.now_us,
                   {{"approver", agent},
                    {"scope", "once"},
                    {"withdrawn", true},
                    {"comment", "withdrawn before it was put to approvers"},
                    {"withdrawal", w->data.value("source", "")},
                    {"source", ctx.source}},
                   "agent:" + agent);
  StampTraceparent(RequestTraceparent(input.history), out);
  return Status::Ok();
}

}  // namespace

std::string EscapeGlob(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

Event AllowAlwaysEvent(const Event& req, const std::string& invocation, const std::string& approver,
                       int64_t time_us) {
  const std::string pattern = EscapeGlob(invocation);
  Json rule{{"agent_id", req.agent_id}, {"org_id", req.org_id}, {"allow", Json::array({pattern})}};
  std::string bytes;
  if (!CanonicalBytes(rule, &bytes).ok()) bytes = rule.dump();
  const std::string hash = Sha256Hex(bytes);
  Event e;
  e.type = ev::kPolicyUpdated;
  e.request_id = req.request_id;
  e.id = MakeRequestEventId(req.org_id, e.type, req.request_id, "always");
  e.time_us = time_us;
  e.org_id = req.org_id;
  e.agent_id = req.agent_id;
  e.session_id = req.session_id;
  e.tool = req.tool;
  e.data = {{"policy_version", "agent-rule:" + hash.substr(0, 16)},
            {"content_hash", hash},
            {"source", "approval:" + req.request_id},
            {"tier", "agent_local"},
            {"org_id", req.org_id},
            {"agent_id", req.agent_id},
            {"allow", Json::array({pattern})},
            {"approver", approver}};
  StampTraceparent(TraceparentOf(req), &e);
  return e;
}

ResponseAuthenticator RegistryAuthenticator(const CredentialRegistry* registry, int64_t max_skew_us) {
  return [registry, max_skew_us](const Message& in, int64_t now_us, ApproverIdentity* who, std::string* why) {
    SignedBy by;
    // The request claim set (agent_id) is an agent's withdrawal; anything
    // else is an approver's (or the service's on an approver's behalf).
    JwtParts jwt;
    auto h = in.headers.find(kHeaderAuth);
    const bool as_agent =
        h != in.headers.end() && ParseJwt(h->second, &jwt).ok() && jwt.claims.contains("agent_id");
    const bool ok = as_agent ? AuthenticateRequest(in, *registry, now_us, max_skew_us, &by)
                             : AuthenticateResponse(in, *registry, now_us, max_skew_us, &by);
    if (ok || by.signature_ok) *who = ApproverIdentity{by.identity, by.org_id, as_agent};
    if (!ok) *why = by.check + ": " + by.message;
    return ok;
  };
}

ApproveStage::ApproveStage(ApproveConfig config) : config_(std::move(config)) {}

ApproveStage::~ApproveStage() = default;

StageResult ApproveStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  if (in.topic == config_.topics.approval_responses()) return ProcessResponse(in, ctx, log);
  return ProcessAsk(in, ctx, log);
}

StageResult ApproveStage::ProcessAsk(const Message& in, const StageContext& ctx, const LogView& log) {
  FlowInput input;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &input, &r)) return r;
  const Flow& flow = input.flow;
  const RequestState& st = input.state;
  if (flow.decision.is_null() || flow.decision.value("verdict", "") != "ask" || st.verdict() != "ask") {
    // Only what decide asked about, as the log records it, is held.
    return RejectMalformedFlow(
        name(), config_.topics, in, ctx, "request " + flow.request_id() + " has no ask decision in the log",
        errc::kNotInLog,
        Json{{"request_id", flow.request_id()}, {"org_id", flow.request.value("org_id", "")}});
  }
  // Denied for its agent's pending cap by this very message, read again
  // after a crash: its result again.
  // So is one withdrawn before it was held.
  if (st.approval_settled && !st.approval_requested && SourceOf(st.approval_settled) == ctx.source &&
      (st.approval_settled->data.contains("code") || st.approval_settled->data.value("withdrawn", false))) {
    Settle(input.history, *st.approval_settled, false, &r);
    return r;
  }
  if (st.terminal() || st.approval_settled) return r;  // settled: its outputs went out then
  {
    std::lock_guard<std::mutex> lock(mu_);
    flows_[RequestKey(flow.request.value("org_id", ""), flow.request_id())] = flow;
  }
  if (st.approval_requested) return r;  // held already (a re-sent copy, or read again)
  Event withdrawn;
  bool early = false;
  if (Status s = EarlyWithdrawn(input, ctx, log, &withdrawn, &early); !s.ok()) {
    r.error = s;
    return r;
  }
  if (early) {
    std::vector<Event> with = input.history;
    with.push_back(withdrawn);
    r.events.push_back(withdrawn);
    Settle(with, with.back(), true, &r);
    return r;
  }
  if (DenyOverPendingCap(input, ctx, &r)) return r;

  // The log's decision, not the message's, says what approval is needed.
  const Json approval = st.decision->data.value("approval", Json::object());
  int quorum = 1;
  int64_t timeout_s = kDefaultApprovalTimeoutS;
  Json approvers = Json::array();
  if (approval.is_object()) {
    if (auto q = approval.find("quorum"); q != approval.end() && q->is_number_integer())
      quorum = std::max(1, q->get<int>());
    if (auto t = approval.find("timeout_s");
        t != approval.end() && t->is_number_integer() && t->get<int64_t>() > 0) {
      timeout_s = t->get<int64_t>();
    }
    if (auto a = approval.find("approvers"); a != approval.end() && a->is_array()) {
      for (const auto& x : *a) {
        if (x.is_string() && IsId(x.get<std::string>())) approvers.push_back(x);
      }
    }
  }
  // The deadline counts from when decide asked (decision.made's time), so
  // re-processing yields the same deadline and queueing time before this
  // stage does not extend it.
  const int64_t deadline = st.decision->time_us + timeout_s * 1'000'000;
  std::string args_hash = st.received ? st.received->data.value("args_hash", flow.args_hash) : flow.args_hash;
  r.events.push_back(FlowEvent(flow, ev::kApprovalRequested, ctx.now_us,
                               {{"approvers_needed", quorum},
                                {"deadline", FormatTime(deadline)},
                                {"args_hash", args_hash},
                                {"approvers", approvers},
                                {"timeout_s", timeout_s},
                                {"source", ctx.source}}));
  // The agent is told its call waits (docs/approvals.md): a signed,
  // non-final `pending` message on its results topic; the final result
  // comes when the approval settles.
  const Json pending = MakeResult(
      flow.request, kStatusPending, WithoutProvenance(st.decision->data),
      {{"quorum", quorum}, {"approvals", 0}, {"approvers", approvers}, {"deadline", FormatTime(deadline)}},
      nullptr);
  r.outputs.push_back({MessageFor(config_.topics.results(), flow.request, pending),
                       static_cast<int>(r.events.size()) - 1, pending});
  // Counted at once for the agent's cap: the listener folds it only after
  // the batch is appended, and later asks of this batch must see it (the
  // fold is idempotent, so applying it again then changes nothing).
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : r.events) {
      if (e.type == ev::kApprovalRequested) pending_.Apply(e);
    }
  }
  return r;
}

bool ApproveStage::DenyOverPendingCap(const FlowInput& input, const StageContext& ctx, StageResult* r) {
  const size_t cap = config_.max_pending_per_agent;
  if (cap == 0) return false;
  const Flow& flow = input.flow;
  const std::string org = flow.request.value("org_id", ""), agent = flow.request.value("agent_id", "");
  size_t held = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held = pending_.HeldBy(org, agent);
  }
  if (held < cap) return false;
  const std::string msg =
      "agent '" + agent + "' already has " + std::to_string(held) +
      " calls waiting for approval, the most it may have; this one was not put to approvers";
  std::vector<Event> with = input.history;
  with.push_back(FlowEvent(flow, ev::kApprovalDenied, ctx.now_us,
                           {{"approver", kCapApprover},
                            {"scope", "once"},
                            {"code", errc::kTooManyPending},
                            {"comment", msg},
                            {"pending", held},
                            {"limit", cap},
                            {"source", ctx.source}},
                           "pending-cap"));
  StampTraceparent(RequestTraceparent(input.history), &with.back());
  r->events.push_back(with.back());
  Settle(with, with.back(), true, r);
  return true;
}

bool ApproveStage::FlowFor(const std::vector<Event>& history, Flow* flow) const {
  RequestState st = Summarize(history);
  const std::string key = st.received ? RequestKey(st.received->org_id, st.received->request_id) : "";
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = flows_.find(key); it != flows_.end()) {
      *flow = it->second;
      return true;
    }
  }
  if (!st.received) return false;
  const Json& data = st.received->data;
  auto redacted = data.find("redacted");
  if (redacted != data.end() && redacted->is_array() && !redacted->empty()) return false;
  *flow = Flow{data.value("request", Json::object()), data.value("received_at", ""),
               data.value("args_hash", ""), nullptr};
  return true;
}

void ApproveStage::Settle(const std::vector<Event>& history, const Event& settled, bool fresh,
                          StageResult* r) {
  RequestState st = Summarize(history);
  if (st.approval_settled == nullptr || st.approval_settled->id != settled.id) return;
  const int index = fresh ? static_cast<int>(r->events.size()) - 1 : -1;
  const Json decision = st.decision ? WithoutProvenance(st.decision->data) : Json();
  const Json request = RequestOf(st, settled);
  const Json approval = ApprovalOf(st);
  const std::string tp = RequestTraceparent(history);
  Json result;
  if (settled.type == ev::kApprovalGranted) {
    Flow flow;
    if (FlowFor(history, &flow)) {
      // A flow seen on the approve topic keeps its decision (checked against
      // the log by ReadFlow, secrets intact); the log's copy is redacted.
      if (!flow.decision.is_object()) flow.decision = decision;
      Json j = flow.ToJson();
      j["approval"] = approval;
      r->outputs.push_back({InTrace(tp, MessageFor(config_.topics.execute(), flow.request, j)), -1});
      return;
    }
    if (!fresh) return;  // ended when it was first processed
    // Granted, but the args the tool needs were redacted from the log and
    // the flow is gone (not seen since a restart): end it, as the
    // reconciler does.
    const std::string msg =
        "approved, but the request's secret-bearing args are no longer available; submit it again";
    r->events.push_back(EventAbout(
        history, settled.request_id, ev::kRequestRejected, settled.time_us,
        {{"error", {{"code", errc::kRequestLost}, {"message", msg}}}, {"source", "approve"}}, "approve"));
    result =
        MakeResult(request, "failed", decision, approval, ToolResultError(errc::kRequestLost, msg, true));
    r->outputs.push_back({InTrace(tp, MessageFor(config_.topics.results(), request, result)),
                          static_cast<int>(r->events.size()) - 1, result});
    return;
  }
  const bool expired = settled.type == ev::kApprovalExpired;
  const bool withdrawn = settled.data.value("withdrawn", false);
  const std::string msg =
      expired ? approval.value("comment", "approval expired")
              : (withdrawn ? "withdrawn by " : "denied by ") + approval.value("approver", "") +
                    (approval.contains("comment") ? ": " + approval.value("comment", "") : "");
  // A denial of the stage's own (the pending cap) carries its code; the
  // agent may ask again once fewer of its calls wait.
  const std::string own = settled.type == ev::kApprovalDenied ? settled.data.value("code", "") : "";
  const char* code = expired ? errc::kApprovalExpired : withdrawn ? errc::kWithdrawn : errc::kApprovalDenied;
  result = MakeResult(request, expired ? "expired" : "denied", decision, approval,
                      ToolResultError(own.empty() ? code : own, msg, !own.empty()));
  if (!fresh) result["log_seq"] = settled.seq;
  r->outputs.push_back({InTrace(tp, MessageFor(config_.topics.results(), request, result)), index, result});
}

// One approval response being processed: what it says, who proved to send
// it, and the history of the request it is about.
struct ApproveStage::Response {
  Response(const Message& m, const StageContext& c) : in(m), ctx(c) {}
  const Message& in;
  const StageContext& ctx;
  StageResult r;
  Json resp;
  std::string rid;
  Status valid;
  ApproverIdentity who;
  std::string why = "approval responses are not accepted here (no authenticator)";
  bool authenticated = false;
  std::string org;
  std::vector<Event> history;
  RequestState st;       // of history, once the responder is proven
  std::string decision;  // resp's, once the responder is proven
};

// 1. The response read, its signer authenticated, and the history of the
// request it names (only for a proven identity whose org names one).
Status ApproveStage::ReadResponse(const LogView& log, Response& x) {
  x.valid = ParseInputJson(x.in.value, &x.resp);
  if (x.valid.ok()) x.valid = SchemaRegistry::Builtin().Validate("approval_response", x.resp);
  if (x.resp.is_object()) {
    if (auto it = x.resp.find("request_id"); it != x.resp.end() && it->is_string())
      x.rid = it->get<std::string>();
  }
  if (!IsId(x.rid)) x.rid = RequestIdOfSource(x.ctx.source);
  // Who answers is what the signature proves; the org is the approver's
  // (a deployment admin names it). Unauthenticated: refused under org
  // "unknown", with no look at the request it names.
  x.authenticated = config_.authenticate && config_.authenticate(x.in, x.ctx.now_us, &x.who, &x.why);
  x.org = x.who.org_id;
  if (x.org == "*" && x.resp.is_object()) {
    if (auto it = x.resp.find("org_id"); it != x.resp.end() && it->is_string())
      x.org = it->get<std::string>();
  }
  if (!x.who.identity.empty() && IsId(x.org) && x.org != "*") {
    Status s = log.EventsOfRequest(x.org, x.rid, &x.history);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

// 2. The same message read again after a crash: re-emit what it produced.
// True when it was processed before.
bool ApproveStage::ReemitProcessed(Response& x) {
  for (const Event& e : x.history) {
    if (SourceOf(&e) != x.ctx.source) continue;
    if (e.type == ev::kApprovalRefused) return true;
    if (e.type == ev::kApprovalGranted || e.type == ev::kApprovalDenied || e.type == ev::kApprovalExpired) {
      Settle(x.history, e, false, &x.r);
      return true;
    }
  }
  return false;
}

// The response refused: an approval.refused (quoting what it claims) added
// to x.r, which is returned as it then is.
StageResult ApproveStage::Refuse(Response& x, const std::string& code, const std::string& message) {
  Json data{{"code", code}, {"message", message}, {"source", x.ctx.source}};
  if (x.resp.is_object()) {
    for (const char* k : {"decision", "scope", "args_hash", "response_id"}) {
      if (auto it = x.resp.find(k); it != x.resp.end() && it->is_string()) data[k] = *it;
    }
    if (auto it = x.resp.find("approver"); it != x.resp.end() && it->is_string())
      data["claimed_approver"] = *it;
  }
  // Only a proven identity is recorded as the approver.
  if (x.authenticated) data["approver"] = x.who.identity;
  x.r.events.push_back(
      EventAbout(x.history, x.rid, ev::kApprovalRefused, x.ctx.now_us, std::move(data), x.ctx.source));
  return x.r;
}

// 3. Who answers: authenticated, a valid response, an org it may answer
// for, and the approver it names is the one who signed. The refusal, if any.
std::optional<StageResult> ApproveStage::RefuseResponder(Response& x) {
  const ApproverIdentity& who = x.who;
  if (!x.authenticated) {
    x.history.clear();  // not about the request it names
    return Refuse(x, approve_errc::kUnauthenticated, x.why);
  }
  if (!x.valid.ok()) return Refuse(x, approve_errc::kInvalidResponse, x.valid.message());
  if (!IsId(x.org) || x.org == "*") {
    return Refuse(x, approve_errc::kInvalidResponse,
                  "a deployment-wide approver must name the request's org_id");
  }
  if (who.org_id != "*" && x.resp.contains("org_id") && x.resp["org_id"] != who.org_id) {
    return Refuse(x, approve_errc::kNotEntitled,
                  "'" + who.identity + "' approves for org '" + who.org_id + "' only");
  }
  if (x.resp.value("approver", who.identity) != who.identity) {
    return Refuse(x, approve_errc::kUnauthenticated,
                  "the response names approver '" + x.resp.value("approver", "") + "' but is signed by '" +
                      who.identity + "'");
  }
  return std::nullopt;
}

// 4. The request's state: the responder's kind may give this answer, an
// approval was asked and is not settled. The refusal, if any.
std::optional<StageResult> ApproveStage::RefuseOutOfState(Response& x) {
  const ApproverIdentity& who = x.who;
  const std::string& decision = x.decision;
  // An agent never answers an approval, not even its own; only it withdraws.
  if (who.agent != (decision == "withdraw")) {
    return Refuse(x, approve_errc::kNotEntitled,
                  who.agent ? "an agent may only withdraw its own call, never approve or deny"
                            : "only the request's own agent withdraws it");
  }
  if (x.st.approval_requested == nullptr) {
    StageResult refused = Refuse(x, approve_errc::kUnknown, "no approval was requested for " + x.rid);
    // A withdrawal ahead of its ask, kept for the ask (EarlyWithdrawal):
    // filed under org "unknown" while the request is not in the log, so it
    // names the org the agent's signature proves.
    if (decision == "withdraw" && !refused.events.empty())
      refused.events.back().data["approver_org"] = who.org_id;
    return refused;
  }
  if (x.st.approval_settled || x.st.terminal()) {
    return Refuse(x, approve_errc::kSettled, "the approval of " + x.rid + " is already settled");
  }
  return std::nullopt;
}

// 5. Late, and the tick has not expired it yet: expire it now, so a late
// grant can never run the call. The refusal when late.
std::optional<StageResult> ApproveStage::ExpireIfLate(Response& x) {
  const Json& req = x.st.approval_requested->data;
  int64_t deadline = 0;
  ParseTime(req.value("deadline", ""), &deadline);
  if (x.ctx.now_us < deadline) return std::nullopt;
  std::vector<Event> with = x.history;
  Event expired = EventAbout(x.history, x.rid, ev::kApprovalExpired, x.ctx.now_us,
                             {{"deadline", req.value("deadline", "")}, {"source", x.ctx.source}}, "");
  x.r.events.push_back(expired);
  with.push_back(expired);
  Settle(with, with.back(), true, &x.r);
  return Refuse(x, errc::kApprovalExpired,
                "the approval of " + x.rid + " expired at " + req.value("deadline", ""));
}

// 6. A withdrawal: only by the request's own agent; it settles the
// approval as denied (withdrawn).
StageResult ApproveStage::Withdraw(Response& x) {
  const ApproverIdentity& who = x.who;
  const Event& about = x.st.received ? *x.st.received : *x.st.approval_requested;
  if (about.agent_id != who.identity || about.org_id != who.org_id) {
    return Refuse(x, approve_errc::kNotEntitled, "'" + who.identity + "' may withdraw its own requests only");
  }
  Json data{{"approver", who.identity}, {"scope", "once"}, {"withdrawn", true}, {"source", x.ctx.source}};
  for (const char* k : {"comment", "response_id"}) {
    if (x.resp.contains(k)) data[k] = x.resp[k];
  }
  std::vector<Event> with = x.history;
  with.push_back(EventAbout(x.history, x.rid, ev::kApprovalDenied, x.ctx.now_us, std::move(data),
                            "agent:" + who.identity));
  x.r.events.push_back(with.back());
  Settle(with, with.back(), true, &x.r);
  return x.r;
}

// 7. An approver's answer: for the args asked about, by one of the
// approvers named, and no second grant by the same one. The refusal, if any.
std::optional<StageResult> ApproveStage::RefuseUnentitled(Response& x) {
  const Json& req = x.st.approval_requested->data;
  const std::string& approver = x.who.identity;
  const std::string& rid = x.rid;
  if (x.resp["args_hash"] != req.value("args_hash", "")) {
    return Refuse(x, approve_errc::kArgsHashMismatch,
                  "args_hash does not match the pending request's: the response is for other arguments");
  }
  if (auto list = req.find("approvers"); list != req.end() && list->is_array() && !list->empty()) {
    if (std::find(list->begin(), list->end(), Json(approver)) == list->end()) {
      return Refuse(x, approve_errc::kNotEntitled, "'" + approver + "' is not among the approvers of " + rid);
    }
  }
  if (x.decision == "approve") {
    for (const Event* g : x.st.grants) {
      if (g->data.value("approver", "") == approver) {
        return Refuse(
            x, approve_errc::kDuplicate,
            "'" + approver + "' has already approved " + rid + "; the quorum needs distinct approvers");
      }
    }
  }
  return std::nullopt;
}

// 8. The grant or denial recorded; a grant that settles a quorum of
// "always" grants adds its allow-always rule. Then what settling produces.
StageResult ApproveStage::RecordAnswer(Response& x) {
  const std::vector<Event>& history = x.history;
  const std::string& approver = x.who.identity;
  const std::string& decision = x.decision;
  const StageContext& ctx = x.ctx;
  // A grant may also declassify the request's session (decide's session
  // facts fold clears its history labels on it), so it must say why: the
  // comment is the record of it. On a deny it means nothing (a denial
  // clears nothing) and is left out, not refused.
  // (The schema checked both fields' types at step 3.)
  const bool declassify = decision == "approve" && x.resp.value("declassify", false);
  if (declassify && x.resp.value("comment", "").find_first_not_of(" \t\r\n") == std::string::npos) {
    return Refuse(x, approve_errc::kInvalidResponse,
                  "declassify needs a comment: the reason the session is clean again is logged with it");
  }
  Json data{{"approver", approver}, {"scope", x.resp["scope"]}, {"source", ctx.source}};
  for (const char* k : {"comment", "response_id"}) {
    if (x.resp.contains(k)) data[k] = x.resp[k];
  }
  if (declassify) data["declassify"] = true;
  Event e = EventAbout(history, x.rid, decision == "approve" ? ev::kApprovalGranted : ev::kApprovalDenied,
                       ctx.now_us, std::move(data), "approver:" + approver);
  std::vector<Event> with = history;
  with.push_back(e);
  x.r.events.push_back(e);
  RequestState after = Summarize(with);
  if (after.approval_settled && after.approval_settled->id == e.id && e.type == ev::kApprovalGranted) {
    bool always = true;
    for (const Event* g : after.grants) always = always && g->data.value("scope", "") == "always";
    // A file tool's rule pins its path (decision.subject); other tools'
    // their whole invocation. A file tool's decision with no subject (made
    // before decide recorded one, or a call with no path) gets no rule: the
    // grant counts once rather than for every path of the tool.
    const std::string subject = after.decision->data.value("subject", "");
    if (always && IsFileTool(e.tool) && subject.empty()) always = false;
    if (always) {
      std::string invocation = subject;
      if (invocation.empty()) invocation = after.decision->data.value("invocation", "");
      if (invocation.empty()) invocation = e.tool;
      const Event& about = after.received ? *after.received : *after.approval_requested;
      Event rule = AllowAlwaysEvent(about, invocation, approver, ctx.now_us);
      x.r.events.push_back(rule);
      with.push_back(rule);
    }
  }
  Settle(with, with[history.size()], true, &x.r);
  return x.r;
}

// The checks run in this order, and the first refusal wins.
StageResult ApproveStage::ProcessResponse(const Message& in, const StageContext& ctx, const LogView& log) {
  Response x(in, ctx);
  if (Status s = ReadResponse(log, x); !s.ok()) {
    x.r.error = s;
    return x.r;
  }
  if (ReemitProcessed(x)) return x.r;
  if (auto refused = RefuseResponder(x)) return *refused;
  x.st = Summarize(x.history);
  x.decision = x.resp["decision"].get<std::string>();
  if (auto refused = RefuseOutOfState(x)) return *refused;
  if (auto refused = ExpireIfLate(x)) return *refused;
  if (x.decision == "withdraw") return Withdraw(x);
  if (auto refused = RefuseUnentitled(x)) return *refused;
  return RecordAnswer(x);
}

StageResult ApproveStage::Tick(const StageContext& ctx, const LogView& log) {
  StageResult r;
  std::vector<std::pair<std::string, std::string>> due;  // (org, request_id)
  {
    std::lock_guard<std::mutex> lock(mu_);
    due = pending_.Due(ctx.now_us);
  }
  for (const auto& [org, rid] : due) {
    std::vector<Event> history;
    Status s = log.EventsOfRequest(org, rid, &history);
    if (!s.ok()) {
      r.error = s;
      return r;
    }
    RequestState st = Summarize(history);
    if (!st.approval_pending()) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.Forget(org, rid);  // settled or ended elsewhere (e.g. the reconciler)
      continue;
    }
    std::vector<Event> with = history;
    Event expired = EventAbout(
        history, rid, ev::kApprovalExpired, ctx.now_us,
        {{"deadline", st.approval_requested->data.value("deadline", "")}, {"source", kTickSource}}, "");
    r.events.push_back(expired);
    with.push_back(expired);
    Settle(with, with.back(), true, &r);
  }
  return r;
}

Status ApproveStage::Restore(const LogHistory& history) {
  return Load([&history](const std::function<void(const Event&)>& visit) {
    return history.ForEachOpenApprovalEvent(visit);
  });
}

Status ApproveStage::Load(const EventWalk& walk) {
  std::lock_guard<std::mutex> lock(mu_);
  return walk([this](const Event& e) { pending_.Apply(e); });
}

void ApproveStage::OnAppended(const std::vector<Event>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events) {
    pending_.Apply(e);
    if (pending_.finished(e.org_id, e.request_id)) flows_.erase(RequestKey(e.org_id, e.request_id));
  }
}

size_t ApproveStage::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

int64_t ApproveStage::next_deadline_us() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.next_deadline_us();
}

}  // namespace tollgate
