// How the CLI's admin commands (agents, tokens, approvals) reach the one
// process that may write the log (docs/trust.md):
//   - `up` is running (DATA/endpoints.json names its HTTP API and it
//     answers): over HTTP with a token: --token-file, $TOLLGATE_TOKEN, else
//     DATA/admin.token (a local operator with the data dir's admin token is
//     the identity "admin");
//   - no `up`: the CLI opens the log itself (it is then its only writer)
//     and appends the change as the local operator "admin".
// Either way the change is a logged event, and who made it is an
// authenticated identity, never a flag.
#pragma once

#include <memory>
#include <string>

#include "api/api_client.h"  // ApiCall, for the commands that call the API
#include "core/canonical_json.h"
#include "core/credentials.h"
#include "core/status.h"

namespace tollgate::cli {

struct AdminTarget {
  std::string data_dir;
  std::string token_file;  // empty: $TOLLGATE_TOKEN, else DATA/admin.token
};

// The token the CLI presents: --token-file, $TOLLGATE_TOKEN, DATA/admin.token.
Status ResolveToken(const AdminTarget& t, std::string* token);
// The running API's base URL from endpoints.json (EndpointsApiUrl) when it
// answers /healthz, else "" (no `up`, or one without its API).
std::string LiveApiUrl(const std::string& data_dir);

// Adds a credential (an agent or approver public key, or a token, which is
// made here and returned in reply["token"] once). reply is the API's JSON.
Status AddCredential(const AdminTarget& t, const Json& request, Json* reply);
Status RevokeCredential(const AdminTarget& t, const std::string& key_id, const std::string& reason,
                        Json* reply);
Status ListCredentials(const AdminTarget& t, const std::string& kind, const std::string& org, Json* reply);

}  // namespace tollgate::cli
