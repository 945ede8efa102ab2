// An agent withdrawing its own pending call (docs/approvals.md,
// "Withdrawal"): the MCP gateway sends one when a client cancels a call
// that waits for a human. The message is an approval response with
// decision "withdraw", signed with the request claim set (org_id,
// agent_id, request_id, value_sha256, iat) that ingest verifies, by the
// agent's own key or by the service key on its behalf: the approve stage
// takes it from the request's own (org, agent) only.
#pragma once

#include <string>

#include "core/jwt.h"
#include "core/message.h"

namespace tollgate {

// Signed by the agent's key.
Message WithdrawMessage(const Topics& topics, const JwtSigner& agent_key, const std::string& org_id,
                        const std::string& agent_id, const std::string& request_id,
                        const std::string& comment, int64_t iat_s);
// Signed by the service key on behalf of (org_id, agent_id).
Message WithdrawMessageOnBehalf(const Topics& topics, const JwtSigner& service, const std::string& org_id,
                                const std::string& agent_id, const std::string& request_id,
                                const std::string& comment, int64_t iat_s);

}  // namespace tollgate
