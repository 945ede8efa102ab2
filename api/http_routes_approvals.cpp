// The approval routes: pending approvals and their settlement, and the
// "allow always" rules in force (audit/agent_rules.h); api/http_api.h
// lists them all.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "api/approval_response.h"
#include "api/http_api_impl.h"
#include "audit/agent_rules.h"
#include "audit/approvals.h"
#include "audit/log_sink.h"
#include "core/messages.h"

namespace tollgate {
namespace http_api {
namespace {

// GET /v1/approvals's paging (docs/http_api.md): limit= (default 50, at
// most 500), cursor= (a page's next_cursor: the requested_seq of its last
// approval), desc=1 (newest first).
struct ApprovalPaging {
  size_t limit = 50;
  uint64_t cursor = 0;  // 0: from the first
  bool desc = false;
};
constexpr size_t kMaxApprovalsPage = 500;
constexpr size_t kApprovalsPageBytes = 1 << 20;

// False after answering 400 E_INVALID_QUERY.
bool ApprovalPagingOf(const httplib::Request& req, httplib::Response& res, ApprovalPaging* p) {
  auto number = [](const std::string& v, uint64_t* out) {
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoull(v);
    return true;
  };
  uint64_t n = 0;
  if (const std::string v = Param(req, "limit"); !v.empty()) {
    if (!number(v, &n) || n == 0 || n > kMaxApprovalsPage) {
      Error(res, 400, errc::kInvalidQuery, "limit: a number from 1 to " + std::to_string(kMaxApprovalsPage));
      return false;
    }
    p->limit = n;
  }
  if (const std::string v = Param(req, "cursor"); !v.empty()) {
    if (!number(v, &p->cursor)) {
      Error(res, 400, errc::kInvalidQuery, "cursor: pass back a next_cursor this endpoint gave");
      return false;
    }
  }
  const std::string desc = Param(req, "desc");
  if (!desc.empty() && desc != "0" && desc != "1" && desc != "true" && desc != "false") {
    Error(res, 400, errc::kInvalidQuery, "desc: 1 or 0");
    return false;
  }
  p->desc = desc == "1" || desc == "true";
  return true;
}

// GET /v1/approvals: the pending approvals of the caller's org, a page.
void HandleListApprovals(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  if (!Authorize(im->options, req, res, {"approver", "admin"}, &who)) return;
  PendingFilter f{"", Param(req, "agent")};
  if (!ScopedOrg(req, res, who, &f.org_id)) return;
  ApprovalPaging page;
  if (!ApprovalPagingOf(req, res, &page)) return;
  std::vector<PendingApproval> pending;
  Status st = ListPendingApprovals(*im->store, f, &pending);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  // In the order approvals were requested (a seq names each), from the
  // cursor on: a page is at most `limit` of them and about
  // kApprovalsPageBytes (an approval carries its request's arguments).
  std::stable_sort(pending.begin(), pending.end(), [&](const PendingApproval& a, const PendingApproval& b) {
    return page.desc ? a.requested_seq > b.requested_seq : a.requested_seq < b.requested_seq;
  });
  Json list = Json::array();
  size_t bytes = 0;
  std::string next;
  for (const auto& p : pending) {
    if (page.cursor != 0 && (page.desc ? p.requested_seq >= page.cursor : p.requested_seq <= page.cursor))
      continue;
    if (list.size() >= page.limit || (!list.empty() && bytes >= kApprovalsPageBytes)) {
      next = std::to_string(list.back()["requested_seq"].get<uint64_t>());
      break;
    }
    Json j = p.ToJson();
    const bool listed = p.approvers.empty() ||
                        std::find(p.approvers.begin(), p.approvers.end(), who.identity) != p.approvers.end();
    j["you_may_approve"] =
        listed && std::find(p.granted_by.begin(), p.granted_by.end(), who.identity) == p.granted_by.end();
    bytes += j.dump(-1, ' ', false, Json::error_handler_t::replace).size();
    list.push_back(std::move(j));
  }
  Reply(res, 200, {{"approvals", list}, {"next_cursor", next}, {"total", pending.size()}});
}

// GET /v1/rules: the "allow always" rules in force.
void HandleListRules(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  if (!Authorize(im->options, req, res, {"approver", "auditor", "admin"}, &who)) return;
  std::string org;
  if (!ScopedOrg(req, res, who, &org)) return;
  std::vector<AgentRule> rules;
  Status st = ListAgentRules(*im->store, org, Param(req, "agent"), &rules);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  Json list = Json::array();
  for (const auto& r : rules) list.push_back(r.ToJson());
  Reply(res, 200, {{"rules", list}});
}

// POST /v1/rules/revoke: appends the policy.updated that revokes a rule.
void HandleRevokeRule(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"admin"}, &who)) return;
  Json body;
  if (!ReadBody(req, res, &body)) return;
  if (o.sink == nullptr) return Error(res, 503, errc::kInternal, "this server cannot append to the log");
  const std::string agent = body.value("agent_id", ""), pattern = body.value("pattern", "");
  std::string org = who.org_id == "*" ? body.value("org_id", "") : who.org_id;
  if (agent.empty() || pattern.empty() || org.empty() || org == "*") {
    return Error(res, 400, errc::kInvalidQuery,
                 "give agent_id, pattern (and org_id with a deployment-wide token)");
  }
  if (who.org_id != "*" && body.contains("org_id") && body["org_id"] != who.org_id) {
    return Error(res, 403, errc::kForbidden,
                 "'" + who.identity + "' may not change org '" + body.value("org_id", "") + "'");
  }
  std::vector<AgentRule> rules;
  Status st = ListAgentRules(*im->store, org, agent, &rules);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  if (std::none_of(rules.begin(), rules.end(), [&](const AgentRule& r) { return r.pattern == pattern; })) {
    return Error(res, 404, errc::kNotFound,
                 "agent '" + agent + "' of org '" + org + "' has no rule '" + pattern + "'");
  }
  uint64_t seq = 0;
  if (!AppendOne(*o.sink,
                 AgentRulesRevokedEvent(org, agent, {pattern}, who.identity, body.value("comment", ""),
                                        NowMicros()),
                 &seq)
           .ok()) {
    return Error(res, 503, errc::kInternal, "the log did not take the revocation");
  }
  Reply(res, 200, {{"revoked", pattern}, {"org_id", org}, {"agent_id", agent}, {"seq", seq}});
}

// Waits up to `wait` for the approve stage's verdict on response_id in the
// log and answers it: 200 (granted, denied), 409 (refused), or 202 (not
// judged yet).
void ReplyOutcome(StoreLogView& view, const std::string& org, const std::string& rid,
                  const std::string& response_id, std::chrono::milliseconds wait, std::vector<Event>* events,
                  httplib::Response& res) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!view.EventsOfRequest(org, rid, events).ok()) break;
    for (const Event& e : *events) {
      if (e.data.value("response_id", "") != response_id) continue;
      RequestState now = Summarize(*events);
      Json out{{"request_id", rid},
               {"response_id", response_id},
               {"event", e.RecordJson()},
               {"approval_pending", now.approval_pending()},
               {"settled", now.approval_settled ? now.approval_settled->type : ""}};
      if (e.type == ev::kApprovalRefused) {
        out["outcome"] = "refused";
        out["error"] = {{"code", e.data.value("code", "")}, {"message", e.data.value("message", "")}};
        return Reply(res, 409, out);
      }
      out["outcome"] = e.type == ev::kApprovalGranted ? "granted" : "denied";
      return Reply(res, 200, out);
    }
  } while (std::chrono::steady_clock::now() < deadline);
  Reply(res, 202, {{"request_id", rid}, {"response_id", response_id}, {"outcome", "submitted"}});
}

// POST /v1/approvals/{id}: publishes the caller's approval response, then
// reports what the approve stage made of it (ReplyOutcome).
void HandleSettleApproval(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"approver", "admin"}, &who)) return;
  const std::string rid = req.matches[1];
  Json body;
  if (!ReadBody(req, res, &body)) return;
  if (!o.service_signer)
    return Error(res, 503, errc::kInternal, "this server cannot sign approval responses");
  // request_ids are per org: the caller's, or the one a deployment-wide
  // admin names.
  std::string org = who.org_id;
  if (org == "*") org = Param(req, "org").empty() ? body.value("org_id", "") : Param(req, "org");
  if (org.empty() || org == "*") {
    return Error(res, 400, errc::kInvalidQuery,
                 "a deployment-wide caller must name the request's org (org=)");
  }
  StoreLogView view(*im->store);
  std::vector<Event> events;
  Status st = view.EventsOfRequest(org, rid, &events);
  if (!st.ok()) return Error(res, 500, st.code(), st.message());
  RequestState state = Summarize(events);
  // Another org's request is as invisible as one that does not exist.
  if (state.approval_requested == nullptr || !who.InOrg(state.approval_requested->org_id)) {
    return Error(res, 404, errc::kNotFound, "no approval requested for '" + rid + "'");
  }
  Json resp;
  st = ApprovalResponseFrom(body, rid, org, who.identity,
                            state.approval_requested->data.value("args_hash", Json("")), &resp);
  if (!st.ok()) return Error(res, 400, st.code(), st.message());
  const Json request = state.received ? state.received->data.value("request", Json::object())
                                      : Json{{"request_id", rid},
                                             {"agent_id", state.approval_requested->agent_id},
                                             {"session_id", state.approval_requested->session_id}};
  {
    std::lock_guard<std::mutex> lock(im->producer_mu);
    st = PublishApprovalResponse(*im->producer, o.bus.topics, request, resp, *o.service_signer, who.org_id);
  }
  if (!st.ok()) return Error(res, 503, st.code(), "could not publish the response: " + st.message());
  // Wait for the stage's verdict on this response in the log.
  const std::string response_id = resp["response_id"];
  ReplyOutcome(view, org, rid, response_id, o.outcome_wait, &events, res);
}

}  // namespace

void RegisterApprovalRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/v1/approvals", Bind(im, HandleListApprovals));
  svr.Get("/v1/rules", Bind(im, HandleListRules));
  svr.Post("/v1/rules/revoke", Bind(im, HandleRevokeRule));
  svr.Post(R"(/v1/approvals/([^/]+))", Bind(im, HandleSettleApproval));
}

}  // namespace http_api
}  // namespace tollgate
