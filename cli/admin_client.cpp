#include "cli/admin_client.h"

#include <cstdlib>
#include <fstream>

#include "api/api_client.h"
#include "api/tokens.h"
#include "audit/credentials_log.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "deploy/endpoints.h"

namespace tollgate::cli {
namespace {

// The local operator's credential changes, straight into the log.
class LocalLog {
 public:
  Status Open(const std::string& data_dir) {
    Status s = EventLog::Open(data_dir + "/log", LogOptions(), &log_);
    if (!s.ok()) {
      return Status::Error(
          s.code(), "cannot open the log (is `tollgate up` running without its HTTP API?): " + s.message());
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
    return Status::Error("E_UNAUTHORIZED",
                         "no token: give --token-file or $TOLLGATE_TOKEN (cannot read " + path + ")");
  }
  while (!token->empty() && (token->back() == '\r' || token->back() == ' ')) token->pop_back();
  return Status::Ok();
}

std::string LiveApiUrl(const std::string& data_dir) {
  const std::string url = EndpointsApiUrl(data_dir);
  return !url.empty() && ApiAnswers(url) ? url : "";
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

Status RevokeCredential(const AdminTarget& t, const std::string& key_id, const std::string& reason,
                        Json* reply) {
  if (const std::string url = LiveApiUrl(t.data_dir); !url.empty()) {
    std::string token;
    Status s = ResolveToken(t, &token);
    if (!s.ok()) return s;
    int status = 0;
    return ApiCall(url, token, "DELETE", "/v1/credentials/" + key_id + "?reason=" + EncodeQueryParam(reason),
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
