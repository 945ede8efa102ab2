#include "api/approval_response.h"

#include "api/tokens.h"
#include "core/auth.h"
#include "core/event.h"
#include "core/messages.h"
#include "core/schema.h"

namespace tollgate {

Json ApprovalAnswer(const std::string& decision, bool always, const std::string& comment,
                    const std::string& args_hash, bool declassify) {
  Json body{{"decision", decision}, {"scope", always ? "always" : "once"}};
  if (!comment.empty()) body["comment"] = comment;
  if (!args_hash.empty()) body["args_hash"] = args_hash;
  if (declassify) body["declassify"] = true;
  return body;
}

Status ApprovalResponseFrom(const Json& answer, const std::string& request_id, const std::string& org_id,
                            const std::string& approver, const Json& pending_args_hash, Json* response) {
  auto field = [&](const char* k, Json dflt) { return answer.contains(k) ? answer[k] : dflt; };
  Json resp{{"request_id", request_id},
            {"org_id", org_id},
            {"decision", field("decision", "")},
            {"approver", approver},
            {"scope", field("scope", "once")},
            {"args_hash", field("args_hash", pending_args_hash)},
            {"response_id", "http-" + NewToken().substr(0, 24)}};
  for (const char* k : {"comment", "declassify"}) {
    if (answer.contains(k)) resp[k] = answer[k];
  }
  Status s = SchemaRegistry::Builtin().Validate("approval_response", resp);
  if (!s.ok()) return s;
  *response = std::move(resp);
  return Status::Ok();
}

Status PublishApprovalResponse(Producer& producer, const Topics& topics, const Json& request,
                               const Json& response, const JwtSigner& service_signer,
                               const std::string& approver_org) {
  Message m = MessageFor(topics.approval_responses(), request, response);
  m.headers[kHeaderAuth] = SignResponse(service_signer, "tollgate-api", response.value("org_id", ""),
                                        response.value("request_id", ""), m.value, NowMicros() / 1'000'000,
                                        response.value("approver", ""), approver_org);
  Status s = producer.Send(m);
  if (s.ok()) s = producer.Flush(std::chrono::seconds(10));
  return s;
}

}  // namespace tollgate
