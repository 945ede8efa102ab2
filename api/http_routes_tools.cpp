// The routes an agent calls tools through: the tools it may call, and the
// MCP gateway (mcp/http_endpoint.h, docs/mcp.md). api/http_api.h lists
// them all.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "api/http_api_impl.h"
#include "core/tool_discovery.h"

namespace tollgate {
namespace http_api {
namespace {

// Whether the client on `sock` has hung up (or reset): what an event
// stream checks between its writes, so a tools/call whose client left is
// noticed in well under a second even when nothing is being sent.
bool PeerGone(int sock) {
  if (sock < 0) return false;
  pollfd p{sock, static_cast<short>(POLLIN | POLLRDHUP), 0};
  int r;
  do r = ::poll(&p, 1, 0);
  while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char c;
  return ::recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// What request.received records of how the caller authenticated: an
// OAuth token's issuer, subject, jti and scopes, never the token; null
// for a static token.
Json OAuthRecord(const Principal& who) {
  if (!who.oauth()) return nullptr;
  return {{"method", "oauth"},
          {"issuer", who.issuer},
          {"subject", who.subject},
          {"jti", who.token_id},  // not "token_id": redaction takes *token* keys for secrets
          {"scopes", who.scopes}};
}

// GET /v1/tools?agent=A: the tools A may call, with schemas.
void HandleListTools(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"agent", "auditor", "approver", "admin"}, &who)) return;
  if (!o.list_tools) return Error(res, 503, "E_UNAVAILABLE", "this server lists no tools");
  const bool agent_only = !who.Has("auditor") && !who.Has("approver") && !who.admin();
  std::string org = req.has_param("org") ? req.get_param_value("org") : who.org_id;
  std::string agent =
      req.has_param("agent") ? req.get_param_value("agent") : (agent_only ? who.identity : "");
  if (org == "*" || org.empty()) return Error(res, 400, errc::kInvalidQuery, "name the org (org=)");
  if (agent.empty()) return Error(res, 400, errc::kInvalidQuery, "name the agent (agent=)");
  if (!who.InOrg(org)) return Error(res, 403, errc::kForbidden, "the token is not of org '" + org + "'");
  if (agent_only && agent != who.identity) {
    return Error(res, 403, errc::kForbidden, "an agent token lists its own tools only");
  }
  // Discovery (core/tool_discovery.h): ?category=&safe_only=&keyword=&format=.
  ToolQuery q{req.get_param_value("category"), req.get_param_value("safe_only") == "true",
              req.get_param_value("keyword"), req.get_param_value("format")};
  if (Status c = CheckToolQuery(q); !c.ok()) return Error(res, 400, c.code(), c.message());
  Json out;
  Status s = o.list_tools(org, agent, &out);
  if (!s.ok()) return Error(res, 503, s.code(), s.message());
  out["tools"] = DiscoverTools(out.value("tools", Json::array()), q);
  if (!q.format.empty()) out["format"] = q.format;
  Reply(res, 200, out);
}

// POST|GET|DELETE /mcp: an agent's MCP session over Streamable HTTP.
void HandleMcp(Impl* im, const httplib::Request& req, httplib::Response& res) {
  const ApiOptions& o = im->options;
  Principal who;
  if (!Authorize(o, req, res, {"agent"}, &who)) return;
  if (who.org_id == "*") return Error(res, 403, errc::kForbidden, "an agent token names one org");
  if (!HasToolScopes(o, req, res, who)) return;
  mcp::HttpCall call;
  call.method = req.method;
  call.body = req.body;
  call.header = [&req](const std::string& h) { return req.get_header_value(h.c_str()); };
  call.org = who.org_id;
  call.agent = who.identity;
  call.auth = OAuthRecord(who);
  // A stream (GET, or a tools/call waiting for its approval) ends once
  // its client hangs up or its token stops authenticating (revoked, or an
  // OAuth token expired). im->options outlives the server, and so the stream.
  call.gone = [&o, sock = CurrentSocket(), auth = req.get_header_value("Authorization")] {
    Principal still;
    OAuthRefusal why;
    return PeerGone(sock) || !Authenticate(o, auth, OAuthResource::kMcp, &still, &why);
  };
  mcp::HttpReply r = o.mcp->Handle(call);
  res.status = r.status;
  for (const auto& [k, v] : r.headers) res.set_header(k.c_str(), v);
  if (!r.stream) {
    if (!r.body.empty()) res.set_content(r.body, r.content_type.c_str());
    return;
  }
  auto stream = std::move(r.stream);
  res.set_chunked_content_provider(r.content_type.c_str(), [stream](size_t, httplib::DataSink& sink) {
    stream([&sink](const std::string& chunk) { return sink.write(chunk.data(), chunk.size()); });
    sink.done();
    return true;
  });
}

}  // namespace

void RegisterToolRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/v1/tools", Bind(im, HandleListTools));
  if (im->options.mcp) {
    const httplib::Server::Handler serve_mcp = Bind(im, HandleMcp);
    svr.Post("/mcp", serve_mcp);
    svr.Get("/mcp", serve_mcp);
    svr.Delete("/mcp", serve_mcp);
  }
}

}  // namespace http_api
}  // namespace tollgate
