// The HTTP API served by `tollgate up` (docs/http_api.md), on cpp-httplib:
//
//   GET  /healthz             no token needed: {"ok": true, "head_seq": N},
//                             plus "degraded": [why, ...] when something is;
//                             503, "ok": false, "log_refusing" while the
//                             log refuses appends (a full disk)
//   GET  /v1/gate-key         no token needed: the key results are signed
//                             with {key_id, public_key, alg, keys: [...]}
//   GET  /metrics             operator, admin (no token with metrics_public):
//                             Prometheus text format (api/metrics.h)
//   GET  /v1/approvals        approver, admin: pending approvals (?org= &agent=),
//                             paged (limit=, cursor=, desc=1; next_cursor)
//   POST /v1/approvals/{id}   approver, admin: {"decision": "approve"|"deny",
//                             "scope": "once"|"always", "comment", "args_hash"}
//   GET  /v1/rules            approver, auditor, admin: the "allow always"
//                             rules in force (?org= &agent=)
//   POST /v1/rules/revoke     admin: {agent_id, pattern, org_id?, comment?}
//                             appends the revoking policy.updated
//   GET  /v1/credentials      admin: agent keys, approver keys, tokens (?kind= &org=)
//   POST /v1/credentials      admin: {kind, org_id, identity, roles, public_key};
//                             a token is made here and shown once
//   DELETE /v1/credentials/{key_id}  admin: revoke (logged, effective at once)
//   GET  /v1/audit            auditor, admin (an agent token: its own
//                             entries): get_audit_log, the filters of
//                             `tollgate audit query`, paginated by cursor
//   GET  /v1/audit/export     auditor, admin: the records of /v1/audit's
//                             filters as a selection export (audit/export.h);
//                             /v1/audit?proofs=1 adds the latest checkpoint
//                             and each event's tlog-proof against it
//   GET  /v1/audit/checkpoint auditor, admin: the latest signed checkpoint
//                             note (?size=N a stored one; ?fresh=1 signs now)
//   GET  /v1/audit/checkpoint-key  auditor, admin: {origin, verifier_key,
//                             public_key}
//   GET  /v1/audit/proof?seq=S     auditor, admin: seq S's C2SP tlog-proof
//                             (&size=N against that stored checkpoint)
//   GET  /v1/audit/consistency?from=M&to=N  auditor, admin: the proof that
//                             the tree of size M is a prefix of the stored
//                             checkpoint of size N
//   GET  /v1/whoami           any token: {identity, org_id, roles}, and an
//                             OAuth token's {issuer, subject, token_id, scopes}
//   GET  /.well-known/oauth-protected-resource[/mcp|/v1]  no token: RFC 9728
//                             metadata, with --oauth only (docs/oauth.md)
//   GET  /v1/connections      operator, admin of org "*": what the fair-share
//                             pools hold, the refusals, MCP sessions and
//                             streams (api/fair_share.h)
//   GET  /, /console/{file}   the web console (api/console.h), no token:
//                             static files; the page asks for one
//   GET  /v1/replay/sessions/{id}          auditor, admin: the timeline
//   GET  /v1/replay/sessions/{id}/verify   auditor, admin: chain + re-decision
//   POST /v1/replay/sessions/{id}/what-if  auditor, admin: body = candidate policy
//   GET  /v1/tools?agent=A   the tools A may call, with schemas (an agent
//                             token: its own; auditor, approver, admin: any
//                             agent of their org; org= as audit's)
//   POST|GET|DELETE /mcp      agent: the MCP gateway over Streamable HTTP
//                             (mcp/http_endpoint.h, docs/mcp.md)
//   POST /v1/replay/what-if?agent=A        the same over an agent's sessions
//                             (since=, until=); replay's org= as audit's;
//                             at most max_concurrent_replays at once (503)
//
// Every /v1 call needs "Authorization: Bearer <token>" (api/tokens.h, or
// an OAuth access token with --oauth, api/oauth.h): none or an unknown one
// is 401, a role that may not do it is 403. Tenancy: a
// token bound to an org (admins included) sees and settles its own org only;
// another org's approval is 404 (its existence is not disclosed), naming
// another org in a filter is 403. Only a deployment-wide token (org "*")
// spans orgs, and names the org of a request it settles (org=).
//
// A POST publishes an approval response (approver = the token's identity,
// args_hash = the pending request's unless given) to the approval-responses
// topic, which the approve stage judges and records; the API then waits up
// to outcome_wait for the resulting event in the log and reports it: 200
// (granted or denied), 409 (refused, with the stage's reason code) or 202
// (not judged yet; the response is on its way).
//
// Reads go to the log store directly (thread-safe). Bound to 127.0.0.1 by
// default.
//
// Connections are shared fairly (api/fair_share.h, docs/http_api.md
// "Limits"): a worker thread per connection, counted from accept as
// unauthenticated (a small pool whose oldest member is cut to make room,
// 3 s for the request line and headers), then, once a handler has checked
// the token, against that token, its (org, agent) and its org (429
// E_TOO_MANY_CONNECTIONS), agents and staff (approver, auditor, operator,
// admin) in separate pools. An MCP event stream or a waiting tools/call
// ends when its client hangs up or its token is revoked.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "api/fair_share.h"
#include "api/oauth.h"
#include "api/tokens.h"
#include "audit/log_store.h"
#include "core/credentials.h"
#include "core/stage.h"
#include "mcp/http_endpoint.h"
#include "runtime/kafka_bus.h"

namespace tollgate {

class MerkleStore;   // audit/merkle_store.h
class Checkpointer;  // audit/checkpointer.h

// Request bodies over this are refused with 413 (E_BODY_TOO_LARGE).
inline constexpr size_t kMaxApiBodyBytes = 1 << 20;

struct ApiOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  // Bearer tokens: the credentials folded from the log (core/credentials.h)
  // when set, else `tokens` (tests without a log).
  const CredentialRegistry* credentials = nullptr;
  TokenStore tokens;
  // OAuth access tokens (api/oauth.h, docs/oauth.md), accepted beside the
  // static tokens; null: static tokens only. Start gives it the bound
  // address as its default resource base, and serves its metadata at
  // /.well-known/oauth-protected-resource[/mcp|/v1].
  std::shared_ptr<OAuthResourceServer> oauth;
  // Where credential changes are appended (POST/DELETE /v1/credentials);
  // null: those answer 503.
  EventSink* sink = nullptr;
  // Signs the approval responses the API publishes for a token holder
  // (the deployment's service key, docs/trust.md). Null: POST
  // /v1/approvals answers 503.
  std::shared_ptr<const JwtSigner> service_signer;
  BusConfig bus;  // where approval responses are published
  std::chrono::milliseconds outcome_wait{5000};
  // Replays computed at once; more are refused with 503 E_BUSY (each holds
  // one of the server's worker threads and reads the log on another).
  int max_concurrent_replays = 2;
  // GET /v1/tools: the tools (org, agent) may call (deploy/tool_directory.h);
  // null: 503. The MCP gateway lists with it too.
  std::function<Status(const std::string& org, const std::string& agent, Json* out)> list_tools;
  // The MCP gateway at /mcp (agent tokens only); null: /mcp is 404.
  std::shared_ptr<mcp::HttpEndpoint> mcp;
  // GET /metrics: the exposition text (api/metrics.h); null: 404. Public
  // (no token) only when metrics_public, else an operator or admin token.
  std::function<std::string()> metrics;
  bool metrics_public = false;
  // What is wrong though the process serves (a stage's consumer group has a
  // foreign member): /healthz still answers 200 and "ok", and lists these
  // under "degraded". Null or empty: nothing.
  std::function<std::vector<std::string>()> degraded;
  // /healthz's "policy": the policy in force and the last refused edit of
  // the policy file (DecideStage::PolicyHealth). Null: not shown.
  std::function<Json()> policy_health;
  // Why the log refuses appends (EventLog::refusal()): when not ok,
  // /healthz answers 503 with "ok": false and "log_refusing": {code,
  // message}. Null: not asked.
  std::function<Status()> log_refusal;
  // Connections per pool and identity (api/fair_share.h).
  FairShareLimits limits;
  // The log's Merkle tree and its stored checkpoints: GET
  // /v1/audit/checkpoint, /proof, /consistency and /v1/audit's proofs=1.
  // Null: those answer 404 (this deployment keeps no tree).
  const MerkleStore* tree = nullptr;
  // Signs checkpoints (?fresh=1) and names the checkpoint key
  // (/v1/audit/checkpoint-key). Null: those answer 404.
  Checkpointer* checkpointer = nullptr;
};

class ApiServer {
 public:
  static Status Start(ApiOptions options, const LogStore& store, std::unique_ptr<ApiServer>* out);
  // Stops listening and waits for the handlers in flight.
  ~ApiServer();
  int port() const { return port_; }
  // "http://host:port"
  std::string url() const;

 private:
  struct Impl;
  ApiServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// "HOST:PORT" -> host and port; false when malformed.
bool ParseListen(const std::string& text, std::string* host, int* port);

}  // namespace tollgate
