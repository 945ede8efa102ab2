#include "cli/admin_client.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>

#include "api/tokens.h"
#include "audit/credentials_log.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "deploy/pipeline.h"

namespace tollgate::cli {
namespace {

// The local operator's credential changes, straight into the log.
class LocalLog {
 public:
  Status Open(const std::string& data_dir) {
    Status s = EventLog::Open(data_dir + "/log", LogOptions(), &log_);
    if (!s.ok()) {
      return Status::Error(s.code(), "cannot open the log (is `tollgate up` running without its HTTP API?): " +
                                         s.message());
    }
    sink_ = std::make_unique<LogSink>(*log_);
    return FoldCredentials(log_->store(), &registry_);
  }
  Status Append(const Event& e, uint64_t* seq) { return AppendOne(*sink_, e, seq); }
  CredentialRegistry registry_;

 private:
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<LogSink> sink_;
};

Status HttpOutcome(int status, const Json& reply) {
  if (status >= 200 && status < 300) return Status::Ok();
  if (status == 0) return Status::Error("E_UNAVAILABLE", "the HTTP API did not answer");
  const Json err = reply.is_object() ? reply.value("error", Json::object()) : Json::object();
  return Status::Error(err.value("code", "E_HTTP_" + std::to_string(status)), err.value("message", reply.dump()));
}

}  // namespace

Status ResolveToken(const AdminTarget& t, std::string* token) {
  std::string path = t.token_file;
  if (path.empty()) {
    if (const char* env = std::getenv("TOLLGATE_TOKEN"); env != nullptr && *env != '\0') {
      *token = env;
      return Status::Ok();
    }
    path = t.data_dir + "/admin.token";
  }
  std::ifstream in(path);
  if (!in || !std::getline(in, *token) || token->empty()) {
    return Status::Error("E_UNAUTHORIZED", "no token: give --token-file or $TOLLGATE_TOKEN (cannot read " + path + ")");
  }
  while (!token->empty() && (token->back() == '\r' || token->back() == ' ')) token->pop_back();
  return Status::Ok();
}

std::string LiveApiUrl(const std::string& data_dir) {
  Json ep;
  if (!ReadEndpoints(data_dir, &ep).ok()) return "";
  const std::string url = ep.value("http", "");
  if (url.empty()) return "";
  httplib::Client c(url);
  c.set_connection_timeout(2);
  auto res = c.Get("/healthz");
  return res && res->status == 200 ? url : "";
}

Status ApiCall(const std::string& url, const std::string& token, const std::string& method, const std::string& path,
               const std::string& body, int* status, Json* reply) {
  httplib::Client c(url);
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  httplib::Headers h{{"Authorization", "Bearer " + token}};
  httplib::Result res = method == "GET"      ? c.Get(path, h)
                        : method == "DELETE" ? c.Delete(path, h)
                                             : c.Post(path, h, body, "application/json");
  *status = res ? res->status : 0;
  *reply = Json::object();
  if (res) ParseJson(res->body, reply);
  return HttpOutcome(*status, *reply);
}

Status AddCredential(const AdminTarget& t, const Json& request, Json* reply) {
  if (const std::string url = LiveApiUrl(t.data_dir); !url.empty()) {
    std::string token;
    Status s = ResolveToken(t, &token);
    if (!s.ok()) return s;
    int status = 0;
    return ApiCall(url, token, "POST", "/v1/credentials", request.dump(), &status, reply);
  }
  LocalLog local;
  Status s = local.Open(t.data_dir);
  if (!s.ok()) return s;
  const std::string token = request.value("kind", Json("")) == "token" ? NewToken() : "";
  Credential c;
  s = NewCredential(request, "admin", token, local.registry_, &c);
  if (!s.ok()) return s;
  uint64_t seq = 0;
  s = local.Append(CredentialAddedEvent(c, c.added_us), &seq);
  if (!s.ok()) return s;
  *reply = {{"credential", c.ToJson()}, {"log_seq", seq}};
  if (!token.empty()) (*reply)["token"] = token;
  return Status::Ok();
}

Status RevokeCredential(const AdminTarget& t, const std::string& key_id, const std::string& reason, Json* reply) {
  if (const std::string url = LiveApiUrl(t.data_dir); !url.empty()) {
    std::string token;
    Status s = ResolveToken(t, &token);
    if (!s.ok()) return s;
    int status = 0;
    return ApiCall(url, token, "DELETE", "/v1/credentials/" + key_id + "?reason=" + httplib::detail::encode_query_param(reason),
                   "", &status, reply);
  }
  LocalLog local;
  Status s = local.Open(t.data_dir);
  if (!s.ok()) return s;
  Credential c;
  if (!local.registry_.Find(key_id, &c)) return Status::Error("E_NOT_FOUND", "no credential " + key_id);
  uint64_t seq = 0;
  c.revoked_us = NowMicros();
  s = local.Append(CredentialRevokedEvent(c, "admin", reason, c.revoked_us), &seq);
  if (!s.ok()) return s;
  c.revoked = true;
  c.revoked_by = "admin";
  *reply = {{"credential", c.ToJson()}, {"log_seq", seq}};
  return Status::Ok();
}

Status ListCredentials(const AdminTarget& t, const std::string& kind, const std::string& org, Json* reply) {
  // Reading needs no writer: the log as a secondary, as `audit` reads it.
  std::unique_ptr<LogStore> store;
  Status s = LogStore::Open(t.data_dir + "/log", OpenMode::kSecondary, &store);
  if (s.ok()) s = store->CatchUp();
  CredentialRegistry registry;
  if (s.ok()) s = FoldCredentials(*store, &registry);
  if (!s.ok()) return s;
  Json list = Json::array();
  for (const Credential& c : registry.List(kind, org)) list.push_back(c.ToJson());
  *reply = {{"credentials", list}};
  return Status::Ok();
}

}  // namespace tollgate::cli
