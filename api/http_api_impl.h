// Private to api/http_api.cpp and api/http_routes_*.cpp: the state the HTTP API's handlers share,
// the helpers they answer with, and one registration function per group
// of routes (in http_routes_*.cpp; the console's in http_api.cpp).
// ApiServer::Start calls the Register*Routes in the order httplib must
// match them (the first route that matches takes a request).
#pragma once

#include <httplib.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/http_api.h"

namespace tollgate {
namespace http_api {

class GuardedServer;  // http_api.cpp: httplib's Server with the API's limits

// What ApiServer owns. ApiServer::Impl (a private name) derives from it,
// so that handlers outside ApiServer can take it. Outlives the server, so
// every handler may hold it (or a reference into it) for its whole run.
struct Impl {
  ApiOptions options;
  const LogStore* store = nullptr;
  std::atomic<int> replays{0};  // replay requests being computed
  std::unique_ptr<Producer> producer;
  std::mutex producer_mu;
  std::unique_ptr<GuardedServer> server;
  std::thread thread;
};

using RouteHandler = void (*)(Impl* im, const httplib::Request& req, httplib::Response& res);

// An httplib handler that runs `fn` with the server's state.
inline httplib::Server::Handler Bind(Impl* im, RouteHandler fn) {
  return [im, fn](const httplib::Request& req, httplib::Response& res) { fn(im, req, res); };
}

// The route groups, in the order ApiServer::Start registers them.
void RegisterHealthRoutes(Impl* im, httplib::Server& svr);      // http_routes_status.cpp
void RegisterOAuthRoutes(Impl* im, httplib::Server& svr);       // http_routes_oauth.cpp
void RegisterApprovalRoutes(Impl* im, httplib::Server& svr);    // http_routes_approvals.cpp
void RegisterCredentialRoutes(Impl* im, httplib::Server& svr);  // http_routes_credentials.cpp
void RegisterAuditRoutes(Impl* im, httplib::Server& svr);       // http_routes_audit.cpp
void RegisterProofRoutes(Impl* im, httplib::Server& svr);       // http_routes_proofs.cpp
void RegisterReportRoutes(Impl* im, httplib::Server& svr);      // http_routes_report.cpp
void RegisterIdentityRoutes(Impl* im, httplib::Server& svr);    // http_routes_status.cpp
void RegisterReplayRoutes(Impl* im, httplib::Server& svr);      // http_routes_audit.cpp
void RegisterToolRoutes(Impl* im, httplib::Server& svr);        // http_routes_tools.cpp

// The fair-share pools of the server (api/fair_share.h).
const ConnectionBudget& BudgetOf(const Impl* im);
// The socket of the connection the calling worker thread serves; -1 outside one.
int CurrentSocket();

// --- Proofs (http_routes_proofs.cpp) ---

// /v1/audit?proofs=1: *note the latest stored checkpoint ("" before the
// first), and each of `lines` (an event's JSON record) given a "proof", its
// tlog-proof against that checkpoint, or "proof_pending": true when the
// checkpoint does not cover it yet. False after answering (404 when the
// deployment keeps no tree).
bool AddAuditProofs(Impl* im, httplib::Response& res, std::vector<std::string>* lines, std::string* note);

// --- Answering (http_api.cpp) ---

void Reply(httplib::Response& res, int status, const Json& body);
// {"error": {code, message}}; a 401 also names the Bearer scheme.
void Error(httplib::Response& res, int status, const std::string& code, const std::string& message);
// The request body as a JSON object, parsed under the limits of untrusted
// input (depth, number range); false once a 400 with the reason's code is
// set.
bool ReadBody(const httplib::Request& req, httplib::Response& res, Json* body);
// The HTTP status of a failed read: 403, 400, 404 or 500.
int StatusFor(const Status& s);
// The caller, or false after answering 401/403 (or 429/503 when the
// connection would exceed its identity's share).
bool Authorize(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
               std::initializer_list<const char*> roles, Principal* who);
// The protected resource a request is for (api/oauth.h): /mcp's, or the API's.
OAuthResource ResourceOf(const httplib::Request& req);
// The principal of an Authorization header value: a static token
// (BearerPrincipal), else, with --oauth, an access token for `resource`.
// False with *why (never naming the token). No budget, no roles: for
// Authorize, and for a stream re-checking its token.
bool Authenticate(const ApiOptions& o, const std::string& authorization, OAuthResource resource,
                  Principal* who, OAuthRefusal* why);
// Step-up (http_routes_oauth.cpp): false after answering 403
// insufficient_scope when `who` holds an OAuth token and the body of this
// POST /mcp is a tools/call of a tool whose tool_scopes it lacks. The
// challenge names every scope the call needs, held ones included.
bool HasToolScopes(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
                   const Principal& who);
// A query parameter; "" when absent.
std::string Param(const httplib::Request& req, const char* key);
// The org= a caller may read: a caller bound to one org reads that org
// (naming another is 403); an admin, or a token for every org ("*"), reads
// the org it names, or every org ("").
bool ScopedOrg(const httplib::Request& req, httplib::Response& res, const Principal& who, std::string* org);

}  // namespace http_api
}  // namespace tollgate
