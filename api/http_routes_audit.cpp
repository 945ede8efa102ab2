// The routes that read the log for auditors: get_audit_log and its export,
// and replay (replay/from_log.h, as `tollgate replay` runs it).
// api/http_api.h lists them all.
#include <atomic>
#include <optional>
#include <sstream>
#include <string>

#include "api/http_api_impl.h"
#include "audit/audit_query.h"
#include "audit/export.h"
#include "audit/query_params.h"
#include "replay/from_log.h"

namespace tollgate {
namespace http_api {
namespace {

// The since= and until= parameters (RFC 3339), when given; false after
// answering 400.
bool TimeRange(const httplib::Request& req, httplib::Response& res, std::optional<int64_t>* since_us,
               std::optional<int64_t>* until_us) {
  for (const char* k : {"since", "until"}) {
    const std::string v = Param(req, k);
    if (v.empty()) continue;
    int64_t us;
    if (!ParseTime(v, &us)) {
      Error(res, 400, errc::kInvalidQuery, std::string(k) + ": not an RFC 3339 time");
      return false;
    }
    *(std::string(k) == "since" ? since_us : until_us) = us;
  }
  return true;
}

// The get_audit_log query of /v1/audit's parameters, scoped to the caller
// (a caller bound to one org reads that org); false after answering.
bool AuditQueryOf(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
                  std::initializer_list<const char*> roles, AuditQuery* q, QueryScope* scope) {
  Principal who;
  if (!Authorize(o, req, res, roles, &who)) return false;
  Status st = AuditQueryFromParams(AuditParamsFromQueryString(req.params), q);
  if (!st.ok()) {
    Error(res, 400, st.code(), st.message());
    return false;
  }
  *scope = QueryScope::Operator();
  if (who.org_id != "*") {
    *scope = QueryScope::Tenant(who.org_id);
    if (q->org_id.empty()) q->org_id = who.org_id;
  }
  // An agent's token is bound to (org, agent): its own entries only, as
  // the get_audit_log tool gives it.
  if (!who.Has("auditor") && !who.admin()) {
    if (who.org_id == "*" || (!q->agent_id.empty() && q->agent_id != who.identity)) {
      Error(res, 403, errc::kForbidden, "an agent's token reads its own entries only");
      return false;
    }
    q->agent_id = who.identity;
  }
  return true;
}

// The replay target of a request by an auditor or admin: the session in the
// path (/sessions/{id}/...), or agent= with since= and until=; of the
// caller's org (ScopedOrg). False after answering 401/403/400.
bool ReplayTargetOf(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
                    replay::Target* t) {
  Principal who;
  if (!Authorize(o, req, res, {"auditor", "admin"}, &who)) return false;
  if (req.matches.size() > 1) {
    t->session_id = req.matches[1];
    return ScopedOrg(req, res, who, &t->org_id);
  }
  t->agent_id = Param(req, "agent");
  if (t->agent_id.empty()) {
    Error(res, 400, errc::kInvalidQuery, "agent= is required (or replay one session)");
    return false;
  }
  return ScopedOrg(req, res, who, &t->org_id) && TimeRange(req, res, &t->since_us, &t->until_us);
}

// GET /v1/audit: get_audit_log, paginated by cursor.
void HandleAudit(Impl* im, const httplib::Request& req, httplib::Response& res) {
  AuditQuery q;
  QueryScope scope;
  if (!AuditQueryOf(im->options, req, res, {"auditor", "admin", "agent"}, &q, &scope)) return;
  q.json_lines = true;
  AuditPage page;
  Status st = GetAuditLog(*im->store, scope, q, &page);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  // proofs=1: each event's inclusion proof against the latest checkpoint
  // (http_routes_proofs.cpp); audit/query_params.h ignores the parameter.
  const bool proofs = Param(req, "proofs") == "1";
  std::string note;
  if (proofs && !AddAuditProofs(im, res, &page.lines, &note)) return;
  std::string text = "{\"events\":[";
  for (size_t i = 0; i < page.lines.size(); ++i) {
    if (i) text += ',';
    text += page.lines[i];
  }
  text += "],\"next_cursor\":" + Json(page.next_cursor).dump();
  if (proofs) text += ",\"checkpoint\":" + (note.empty() ? std::string("null") : Json(note).dump());
  text += "}\n";
  res.status = 200;
  res.set_content(text, "application/json");
}

// GET /v1/audit/export: the records of a filter as a selection export
// (audit/export.h), which `tollgate audit verify --file` checks: what the
// console's Export gives.
void HandleAuditExport(Impl* im, const httplib::Request& req, httplib::Response& res) {
  AuditQuery q;
  QueryScope scope;
  if (!AuditQueryOf(im->options, req, res, {"auditor", "admin"}, &q, &scope)) return;
  std::ostringstream out;
  Status st = ExportSelection(*im->store, scope, q, out);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  res.status = 200;
  res.set_header("Content-Disposition", "attachment; filename=\"tollgate-audit.jsonl\"");
  res.set_content(out.str(), "application/x-ndjson");
}

// Holds one of the server's max_concurrent_replays slots while a replay is
// computed (each reads the log on a thread of its own and holds a worker
// thread), so replays cannot starve approvals; ok() false after answering
// 503.
class ReplaySlot {
 public:
  ReplaySlot(std::atomic<int>& running, int max, httplib::Response& res) : running_(running) {
    ok_ = running_.fetch_add(1) < max;
    if (!ok_) Error(res, 503, "E_BUSY", "as many replays as allowed are running; retry shortly");
  }
  ~ReplaySlot() { running_.fetch_sub(1); }
  bool ok() const { return ok_; }

 private:
  std::atomic<int>& running_;
  bool ok_;
};

// The candidate policy of a what-if: the request body, YAML (or JSON).
bool CandidatePolicy(const httplib::Request& req, httplib::Response& res, PolicyPtr* out) {
  if (req.body.empty()) {
    Error(res, 400, errc::kPolicyInvalid, "the body must be the candidate policy (YAML or JSON)");
    return false;
  }
  Status st = replay::ParseCandidate(req.body, "http:what-if", out);
  if (!st.ok()) {
    Error(res, 400, st.code(), st.message());
    return false;
  }
  return true;
}

// Replay: auditor, admin. A session or agent with no event in the caller's
// org is 404. Each endpoint takes the request's target (ReplayTargetOf)
// and one of the replay slots, then runs.
using ReplayRun = void (*)(Impl* im, const replay::Target& t, const httplib::Request& req,
                           httplib::Response& res);

httplib::Server::Handler ReplayEndpoint(Impl* im, ReplayRun run) {
  return [im, run](const httplib::Request& req, httplib::Response& res) {
    replay::Target t;
    if (!ReplayTargetOf(im->options, req, res, &t)) return;
    ReplaySlot slot(im->replays, im->options.max_concurrent_replays, res);
    if (!slot.ok()) return;
    run(im, t, req, res);
  };
}

// GET /v1/replay/sessions/{id}: the timeline.
void RunTimeline(Impl* im, const replay::Target& t, const httplib::Request&, httplib::Response& res) {
  replay::SessionTimeline timeline;
  Status st = replay::ReadTimeline(*im->store, t, &timeline);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  Reply(res, 200, {{"timeline", replay::TimelineToJson(timeline)}});
}

// GET /v1/replay/sessions/{id}/verify: chain + re-decision.
void RunVerify(Impl* im, const replay::Target& t, const httplib::Request&, httplib::Response& res) {
  replay::ChainReport chain;
  Status st = replay::CheckTargetChain(*im->store, t, &chain);
  replay::RedecideReport report;
  if (st.ok()) st = replay::RedecideTarget(*im->store, t, {}, &report);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  Reply(res, 200,
        {{"clean", chain.ok() && report.clean()}, {"chain", chain.ToJson()}, {"verify", report.ToJson()}});
}

// One session's what-if, or an agent's sessions' (agent=, since=, until=):
// the body is the candidate policy.
void RunWhatIf(Impl* im, const replay::Target& t, const httplib::Request& req, httplib::Response& res) {
  replay::RedecideOptions options;
  if (!CandidatePolicy(req, res, &options.candidate)) return;
  replay::RedecideReport report;
  Status st = replay::RedecideTarget(*im->store, t, options, &report);
  if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
  Reply(res, 200, {{"what_if", report.ToJson()}});
}

}  // namespace

void RegisterAuditRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/v1/audit", Bind(im, HandleAudit));
  svr.Get("/v1/audit/export", Bind(im, HandleAuditExport));
}

void RegisterReplayRoutes(Impl* im, httplib::Server& svr) {
  svr.Get(R"(/v1/replay/sessions/([^/]+))", ReplayEndpoint(im, RunTimeline));
  svr.Get(R"(/v1/replay/sessions/([^/]+)/verify)", ReplayEndpoint(im, RunVerify));
  const httplib::Server::Handler what_if = ReplayEndpoint(im, RunWhatIf);
  svr.Post(R"(/v1/replay/sessions/([^/]+)/what-if)", what_if);
  svr.Post("/v1/replay/what-if", what_if);
}

}  // namespace http_api
}  // namespace tollgate
