// Approval responses (docs/approvals.md, docs/trust.md): what an approver
// decides about one pending request, in one place for both shells.
// `tollgate approvals approve|deny` sends it as the body of POST
// /v1/approvals/{id} (ApprovalAnswer); the HTTP API makes that body the
// approval_response the approve stage judges (ApprovalResponseFrom) and
// publishes it signed by the service key on behalf of the token's identity
// (PublishApprovalResponse). The approver is always an authenticated
// identity, never a field of the body.
#pragma once

#include <string>

#include "core/canonical_json.h"
#include "core/jwt.h"
#include "core/message.h"
#include "core/status.h"
#include "runtime/kafka_bus.h"

namespace tollgate {

// The POST body: {"decision": "approve"|"deny", "scope": "always"|"once",
// "comment"?, "args_hash"?, "declassify"?}. An empty comment or args_hash is
// left out (the API then takes the pending request's args_hash);
// "declassify": true only when asked (the approve stage also declassifies
// the request's session, and requires the comment as the reason).
Json ApprovalAnswer(const std::string& decision, bool always, const std::string& comment,
                    const std::string& args_hash, bool declassify = false);

// The approval_response to a POST body `answer` about `request_id` of
// `org_id`, by `approver`: the body's decision, scope (default "once"),
// comment, declassify and args_hash (default `pending_args_hash`), passed
// on as given so that the schema check names a wrong type
// (E_SCHEMA_VIOLATION), and a fresh response_id ("http-...").
Status ApprovalResponseFrom(const Json& answer, const std::string& request_id, const std::string& org_id,
                            const std::string& approver, const Json& pending_args_hash, Json* response);

// Publishes `response` on topics.approval_responses(), keyed and headed as
// `request` (MessageFor), signed by `service_signer` on behalf of the
// response's approver of `approver_org` (the approve stage counts that
// identity), and waits for the broker's ack (at most 10 s).
Status PublishApprovalResponse(Producer& producer, const Topics& topics, const Json& request,
                               const Json& response, const JwtSigner& service_signer,
                               const std::string& approver_org);

}  // namespace tollgate
