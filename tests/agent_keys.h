// Test agents that sign their requests for real (docs/trust.md): each
// (org, agent) gets a fresh Ed25519 key, registered in the pipeline's log
// as the CLI would (credential.added), and every message it sends carries
// a tollgate-auth header over its exact bytes. Approvers likewise sign
// approval responses with keys of their own.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "core/auth.h"
#include "core/jwt.h"
#include "deploy/pipeline.h"

namespace tollgate::testing {

class TestSigners {
 public:
  explicit TestSigners(Pipeline& p) : p_(p) {}

  // Signs `m` (a request on tollgate.requests) as the org_id and agent_id
  // its JSON value names, registering that agent's key on first use.
  void SignRequest(Message* m) {
    Json v;
    std::string org = "unknown", agent = "unknown", rid;
    if (ParseJson(m->value, &v).ok() && v.is_object()) {
      org = v.value("org_id", org);
      agent = v.value("agent_id", agent);
      rid = v.value("request_id", "");
    }
    m->headers[kHeaderAuth] =
        tollgate::SignRequest(Agent(org, agent), org, agent, rid, m->value, NowMicros() / 1'000'000);
  }

  // The signer of (org, agent); registers a key for it on first use.
  const JwtSigner& Agent(const std::string& org, const std::string& agent) {
    return Key("agent_key", org, agent, {"agent"});
  }
  // An approver's (or admin's) own key, registered on first use.
  const JwtSigner& Approver(const std::string& org, const std::string& identity,
                            std::vector<std::string> roles = {"approver"}) {
    return Key("approver_key", org, identity, std::move(roles));
  }
  // Signs an approval response message as `identity` of `org`.
  void SignResponse(Message* m, const std::string& org, const std::string& identity) {
    Json v;
    std::string rid;
    if (ParseJson(m->value, &v).ok() && v.is_object()) rid = v.value("request_id", "");
    m->headers[kHeaderAuth] = tollgate::SignResponse(Approver(org, identity), identity, org, rid, m->value,
                                                     NowMicros() / 1'000'000);
  }

 private:
  const JwtSigner& Key(const std::string& kind, const std::string& org, const std::string& identity,
                       std::vector<std::string> roles) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string k = kind + "\n" + org + "\n" + identity;
    auto it = signers_.find(k);
    if (it != signers_.end()) return it->second;
    Credential c;
    JwtSigner s;
    if (!NewSigningKey(kind, org, identity, std::move(roles), "test", &c, &s).ok()) std::abort();
    if (!p_.AppendCredentialEvent(CredentialAddedEvent(c, NowMicros())).ok()) std::abort();
    return signers_.emplace(k, std::move(s)).first->second;
  }

  Pipeline& p_;
  std::mutex mu_;
  std::map<std::string, JwtSigner> signers_;
};

}  // namespace tollgate::testing
