#include "core/withdraw.h"

#include "core/auth.h"
#include "core/canonical_json.h"

namespace tollgate {
namespace {

Message Unsigned(const Topics& topics, const std::string& org_id, const std::string& request_id,
                 const std::string& comment) {
  Message m;
  m.topic = topics.approval_responses();
  m.key = request_id;
  m.value =
      Json{{"request_id", request_id}, {"decision", "withdraw"}, {"org_id", org_id}, {"comment", comment}}
          .dump();
  return m;
}

}  // namespace

Message WithdrawMessage(const Topics& topics, const JwtSigner& agent_key, const std::string& org_id,
                        const std::string& agent_id, const std::string& request_id,
                        const std::string& comment, int64_t iat_s) {
  Message m = Unsigned(topics, org_id, request_id, comment);
  m.headers[kHeaderAuth] = SignRequest(agent_key, org_id, agent_id, request_id, m.value, iat_s);
  return m;
}

Message WithdrawMessageOnBehalf(const Topics& topics, const JwtSigner& service, const std::string& org_id,
                                const std::string& agent_id, const std::string& request_id,
                                const std::string& comment, int64_t iat_s) {
  Message m = Unsigned(topics, org_id, request_id, comment);
  m.headers[kHeaderAuth] = SignRequestOnBehalf(service, org_id, agent_id, request_id, m.value, iat_s);
  return m;
}

}  // namespace tollgate
