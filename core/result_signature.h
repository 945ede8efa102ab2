// Results an agent can trust (docs/trust.md, "Results are signed by the
// gate").
//
// Anyone who can write a results topic can write anything there, so a
// waiter believes a result only when the gate signed it: header
// kHeaderResultSig is a compact JWT (EdDSA over Ed25519, core/jwt.h) made
// with the deployment's gate key (kind `gate_key`, identity kGateIdentity,
// registered in the log like every credential; its public half is in
// endpoints.json and at GET /v1/gate-key). Its claims:
//
//   {"typ": "tollgate-result", "org_id", "agent_id", "request_id",
//    "status", "value_sha256": hex SHA-256 of the exact value bytes}
//
// No time claim: a result re-made for a message read again must be the
// same bytes, header included (runtime/committed_outputs.h), and Ed25519
// signatures are deterministic. A copy replayed later is harmless: a
// request_id is one request, and its result is the same result.
//
// Status "pending" is the one non-final message: the call waits for
// approvers (approve stage); a waiter keeps waiting for a final one.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/jwt.h"
#include "core/message.h"
#include "core/status.h"

namespace tollgate {

inline constexpr const char* kHeaderResultSig = "tollgate-result-sig";
inline constexpr const char* kGateIdentity = "tollgate-gate";
inline constexpr const char* kResultSigType = "tollgate-result";
// The non-final status: approval was requested (docs/approvals.md).
inline constexpr const char* kStatusPending = "pending";

namespace errc {
// A message on a results topic that the gate did not sign, or that is
// not the result the waiter expects (docs/trust.md).
inline constexpr const char* kResultUnsigned = "E_RESULT_UNSIGNED";
}  // namespace errc

// Signs `m`, a result as MessageFor makes it (its value a JSON object with
// string org_id, agent_id, request_id and status): sets its
// kHeaderResultSig. False, `m` untouched, for anything else.
// `parsed`, when given, is m->value parsed (its ids and status are read
// from it instead of parsing again).
bool SignResult(const JwtSigner& gate, Message* m, const Json* parsed = nullptr);

// Who a waiter is waiting for. An empty agent_id matches any agent of the
// org (the MCP gateway over stdio acts for one agent and passes it; a
// deployment-wide reader such as a test may leave it empty).
struct ResultFor {
  std::string org_id;
  std::string agent_id;
  std::string request_id;
};

// Checks that `m` is a result the gate signed (one of `gate_keys`: every
// active gate key of the deployment), over exactly `m.value`, whose claims
// and value name `want`'s ids. Ok and *result the parsed value (bounded
// parse, core/canonical_json.h), or E_RESULT_UNSIGNED with the reason.
Status VerifyResult(const Message& m, const std::vector<Ed25519Verifier>& gate_keys, const ResultFor& want,
                    Json* result);

inline bool IsFinalStatus(const std::string& status) { return status != kStatusPending; }

}  // namespace tollgate
