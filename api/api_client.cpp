#include "api/api_client.h"

#include <httplib.h>

namespace tollgate {
namespace {

Status HttpOutcome(int status, const Json& reply) {
  if (status >= 200 && status < 300) return Status::Ok();
  if (status == 0) return Status::Error("E_UNAVAILABLE", "the HTTP API did not answer");
  const Json err = reply.is_object() ? reply.value("error", Json::object()) : Json::object();
  return Status::Error(err.value("code", "E_HTTP_" + std::to_string(status)),
                       err.value("message", reply.dump()));
}

}  // namespace

bool ApiAnswers(const std::string& url) {
  httplib::Client c(url);
  c.set_connection_timeout(2);
  auto res = c.Get("/healthz");
  // 503: up, but its log refuses appends (/healthz says why); the call
  // then gets the API's own error instead of a second opener of the log.
  return res && (res->status == 200 || res->status == 503);
}

Status ApiCall(const std::string& url, const std::string& token, const std::string& method,
               const std::string& path, const std::string& body, int* status, Json* reply) {
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

Status ApiGetText(const std::string& url, const std::string& token, const std::string& path,
                  std::string* text) {
  httplib::Client c(url);
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  httplib::Result res = c.Get(path, httplib::Headers{{"Authorization", "Bearer " + token}});
  const int status = res ? res->status : 0;
  Json reply = Json::object();
  if (status >= 200 && status < 300) {
    *text = res->body;
  } else if (res) {
    ParseJson(res->body, &reply);
  }
  return HttpOutcome(status, reply);
}

std::string EncodeQueryParam(const std::string& value) { return httplib::detail::encode_query_param(value); }

}  // namespace tollgate
