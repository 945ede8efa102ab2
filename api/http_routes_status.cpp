// The routes that say how the server is (health, keys, metrics) and who
// the caller is (whoami, connections); api/http_api.h lists them all.
#include <algorithm>
#include <string>
#include <vector>

#include "api/fair_share.h"
#include "api/http_api_impl.h"
#include "api/metrics.h"
#include "core/credentials.h"

namespace tollgate {
namespace http_api {
namespace {

// GET /healthz: no token; 503 while the log refuses appends.
void HandleHealthz(Impl* im, const httplib::Request&, httplib::Response& res) {
  uint64_t seq = 0;
  Digest hash;
  Status st = im->store->ReadHead(&seq, &hash);
  Json body{{"ok", st.ok()}, {"head_seq", seq}};
  if (im->options.degraded) {
    if (std::vector<std::string> why = im->options.degraded(); !why.empty()) body["degraded"] = why;
  }
  if (im->options.policy_health) body["policy"] = im->options.policy_health();
  if (Status r = im->options.log_refusal ? im->options.log_refusal() : Status::Ok(); !r.ok()) {
    body["ok"] = false;  // no call can be taken
    body["log_refusing"] = {{"code", r.code()}, {"message", r.message()}};
    st = r;
  }
  Reply(res, st.ok() ? 200 : 503, body);
}

// GET /v1/gate-key: the gate's public keys (core/result_signature.h):
// public, so any agent can check the results it reads. The newest first.
void HandleGateKey(Impl* im, const httplib::Request&, httplib::Response& res) {
  const ApiOptions& o = im->options;
  std::vector<Credential> keys = o.credentials ? o.credentials->List("gate_key") : std::vector<Credential>{};
  keys.erase(std::remove_if(keys.begin(), keys.end(), [](const Credential& c) { return c.revoked; }),
             keys.end());
  if (keys.empty()) return Error(res, 404, errc::kNotFound, "this deployment registered no gate key");
  std::sort(keys.begin(), keys.end(),
            [](const Credential& a, const Credential& b) { return a.added_us > b.added_us; });
  Json all = Json::array();
  for (const Credential& c : keys)
    all.push_back({{"key_id", c.key_id}, {"public_key", c.public_key}, {"alg", "EdDSA"}});
  Json body = all[0];
  body["keys"] = all;
  Reply(res, 200, body);
}

// GET /metrics: Prometheus text (api/metrics.h).
void HandleMetrics(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  if (!o.metrics) return Error(res, 404, errc::kNotFound, "metrics are not served here");
  Principal who;
  if (!o.metrics_public && !Authorize(o, req, res, {"operator", "admin"}, &who)) return;
  // An org's operator or admin sees its org's series only (api/metrics.h).
  res.set_content(o.metrics_public ? o.metrics() : MetricsVisibleTo(who.org_id, o.metrics()),
                  "text/plain; version=0.0.4; charset=utf-8");
}

// GET /v1/whoami: who the token is (an OAuth token's issuer, subject, jti
// and scopes too); the console's login asks this.
void HandleWhoami(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  if (!Authorize(im->options, req, res, {"agent", "approver", "auditor", "operator", "admin"}, &who)) return;
  Json out{{"identity", who.identity}, {"org_id", who.org_id}, {"roles", who.roles}};
  if (who.oauth()) {  // never the token itself
    out["oauth"] = {
        {"issuer", who.issuer}, {"subject", who.subject}, {"token_id", who.token_id}, {"scopes", who.scopes}};
  }
  Reply(res, 200, out);
}

// GET /v1/connections: what the fair-share pools hold (api/fair_share.h):
// deployment-wide figures, so an operator or a deployment admin only.
void HandleConnections(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"operator", "admin"}, &who)) return;
  if (who.org_id != "*")
    return Error(res, 403, errc::kForbidden, "deployment-wide figures: a token of org '*' only");
  const ConnectionBudget& b = BudgetOf(im);
  const ConnectionBudget::Usage u = b.usage();
  Json out{
      {"connections", {{"unauthenticated", u.unauthenticated}, {"agent", u.agent}, {"staff", u.staff}}},
      {"refused", {{"identity_cap", u.refused_identity}, {"busy", u.refused_busy}, {"evicted", u.evicted}}},
      {"limits", b.limits().ToJson()}};
  if (o.mcp) out["mcp"] = o.mcp->Stats();
  if (const std::string org = Param(req, "org"); !org.empty()) {
    out["org"] = {{"org_id", org}, {"agent_connections", b.org_connections(org)}};
    if (const std::string agent = Param(req, "agent"); !agent.empty()) {
      out["org"]["agent_id"] = agent;
      out["org"]["connections_of_agent"] = b.agent_connections(org, agent);
    }
  }
  Reply(res, 200, out);
}

}  // namespace

void RegisterHealthRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/healthz", Bind(im, HandleHealthz));
  svr.Get("/v1/gate-key", Bind(im, HandleGateKey));
  svr.Get("/metrics", Bind(im, HandleMetrics));
}

void RegisterIdentityRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/v1/whoami", Bind(im, HandleWhoami));
  svr.Get("/v1/connections", Bind(im, HandleConnections));
}

}  // namespace http_api
}  // namespace tollgate
