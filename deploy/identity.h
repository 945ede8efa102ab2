// Setting up who may act, for a process that writes the log (`up`, and the
// CLI's admin commands when no `up` runs): docs/trust.md.
//
//   1. fold the log's credentials into `registry`;
//   2. first start: make the admin token (data/admin.token, mode 0600);
//      import every token of the tokens file the log does not know yet
//      (credential.added, added_by "tokens-file"): from then on the log is
//      the record, and revoking there wins over the file;
//   3. the deployment's service key (data/keys/tollgate-api.pem, 0600),
//      made and registered on first start: the HTTP API signs the approval
//      responses it publishes for token holders with it.
#pragma once

#include <memory>
#include <string>

#include "audit/event_log.h"
#include "core/credentials.h"
#include "core/stage.h"
#include "runtime/event_follower.h"

namespace tollgate {

inline constexpr const char* kServiceIdentity = "tollgate-api";

struct IdentitySetup {
  std::string data_dir;
  std::string tokens_file;  // default data_dir/tokens.json
};

Status SetUpIdentity(const IdentitySetup& setup, const LogStore& store, EventSink& sink,
                     CredentialRegistry* registry, std::shared_ptr<const JwtSigner>* service_signer,
                     bool* admin_token_created);

// The service key's path in a data directory.
std::string ServiceKeyPath(const std::string& data_dir);

// The Kafka ids of a stage's runners, with a secret part derived from the
// deployment key (keys/events.key, 0600 in the data directory; the
// distributed deployment's --deployment-key): the consumer group
// "tollgate-<stage>-<16 hex>" and the transactional id
// "tollgate-<stage>[-<instance>]-<16 hex>". A local process that lacks the
// key cannot join the group (and swallow its messages) or fence the
// stage's producer: the embedded broker has no ACLs, and lists no groups.
// On a real cluster, ACLs do that job (docs/trust.md, "Kafka: consumer
// groups and ACLs").
std::string StageGroupId(const EventsKey& key, const std::string& stage);
std::string StageTransactionalId(const EventsKey& key, const std::string& stage,
                                 const std::string& instance = "");

}  // namespace tollgate
