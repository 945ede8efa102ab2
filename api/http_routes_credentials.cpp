// The credential routes (docs/trust.md): an org's admin manages its own
// org's, a deployment-wide admin every org's and the deployment's. Each
// change is an event appended to the log; the registry (a fold of those
// events) applies it at once. api/http_api.h lists them all.
#include <string>

#include "api/http_api_impl.h"
#include "audit/log_sink.h"
#include "core/credentials.h"
#include "core/messages.h"

namespace tollgate {
namespace http_api {
namespace {

// GET /v1/credentials: agent keys, approver keys, tokens (?kind= &org=).
void HandleListCredentials(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"admin"}, &who)) return;
  std::string org;
  if (!ScopedOrg(req, res, who, &org)) return;
  if (o.credentials == nullptr) return Error(res, 503, errc::kInternal, "no credential registry");
  Json list = Json::array();
  for (const Credential& c : o.credentials->List(Param(req, "kind"), org)) list.push_back(c.ToJson());
  Reply(res, 200, {{"credentials", list}});
}

// POST /v1/credentials: adds one; a token is made here and shown once.
void HandleAddCredential(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"admin"}, &who)) return;
  if (o.credentials == nullptr || o.sink == nullptr)
    return Error(res, 503, errc::kInternal, "no credential registry");
  Json body;
  if (!ReadBody(req, res, &body)) return;
  // The caller's own org unless it names one (a deployment admin must).
  if (!body.contains("org_id") && who.org_id != "*") body["org_id"] = who.org_id;
  if (const Json org = body.value("org_id", Json()); org.is_string()) {
    const std::string o_id = org.get<std::string>();
    if (!who.InOrg(o_id) || (o_id == "*" && who.org_id != "*")) {
      return Error(res, 403, errc::kForbidden,
                   "'" + who.identity + "' may not add credentials to org '" + o_id + "'");
    }
  }
  const std::string token = body.value("kind", Json("")) == "token" ? NewToken() : "";
  Credential c;
  Status st = NewCredential(body, who.identity, token, *o.credentials, &c);
  if (!st.ok()) return Error(res, st.code() == errc::kConflict ? 409 : 400, st.code(), st.message());
  const Event e = CredentialAddedEvent(c, c.added_us);
  uint64_t seq = 0;
  if (!AppendOne(*o.sink, e, &seq).ok())
    return Error(res, 503, errc::kInternal, "the log did not take the change");
  Json out{{"credential", c.ToJson()}, {"log_seq", seq}};
  if (!token.empty()) out["token"] = token;  // shown once, kept nowhere
  Reply(res, 201, out);
}

// DELETE /v1/credentials/{key_id}: revokes one (logged, effective at once).
void HandleRevokeCredential(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"admin"}, &who)) return;
  if (o.credentials == nullptr || o.sink == nullptr)
    return Error(res, 503, errc::kInternal, "no credential registry");
  Credential c;
  // Another org's credential is as invisible as one that does not exist.
  if (!o.credentials->Find(req.matches[1], &c) || !who.InOrg(c.org_id)) {
    return Error(res, 404, errc::kNotFound, "no credential " + std::string(req.matches[1]));
  }
  if (c.org_id == "*" && who.org_id != "*") return Error(res, 403, errc::kForbidden, "deployment credential");
  uint64_t seq = 0;
  if (!AppendOne(*o.sink, CredentialRevokedEvent(c, who.identity, Param(req, "reason"), NowMicros()), &seq)
           .ok()) {
    return Error(res, 503, errc::kInternal, "the log did not take the change");
  }
  o.credentials->Find(c.key_id, &c);
  Reply(res, 200, {{"credential", c.ToJson()}, {"log_seq", seq}});
}

}  // namespace

void RegisterCredentialRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/v1/credentials", Bind(im, HandleListCredentials));
  svr.Post("/v1/credentials", Bind(im, HandleAddCredential));
  svr.Delete(R"(/v1/credentials/([0-9a-f]{16}))", Bind(im, HandleRevokeCredential));
}

}  // namespace http_api
}  // namespace tollgate
