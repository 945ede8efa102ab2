// The HTTP API as an OAuth resource server (api/oauth.h, docs/oauth.md):
// its protected resource metadata (RFC 9728), and the step-up of a
// tools/call whose tool needs a scope the token lacks. api/http_api.h
// lists the routes.
#include <algorithm>
#include <string>
#include <vector>

#include "api/http_api_impl.h"
#include "core/canonical_json.h"
#include "core/tool_discovery.h"

namespace tollgate {
namespace http_api {
namespace {

// GET /.well-known/oauth-protected-resource[/mcp|/v1]: no token (a client
// reads it to find its authorization server). The root one describes /mcp:
// the SDK falls back to it when the path-specific one fails.
void ServeMetadata(httplib::Server& svr, const OAuthResourceServer& oauth, const char* path,
                   OAuthResource r) {
  svr.Get(path, [&oauth, r](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, oauth.Metadata(r));
  });
}

// The tools a POST /mcp body calls: its tools/call's params.name (a
// batch's every one), as the tools' own names.
std::vector<std::string> CalledTools(const std::string& body) {
  std::vector<std::string> tools;
  Json msg;
  if (!ParseInputJson(body, &msg).ok()) return tools;  // the endpoint answers the parse error
  const Json batch = msg.is_array() ? msg : Json::array({msg});
  for (const Json& m : batch) {
    if (!m.is_object() || m.value("method", Json()) != "tools/call") continue;
    const Json params = m.value("params", Json::object());
    if (params.is_object() && params.contains("name") && params["name"].is_string())
      tools.push_back(ToolFromClientName(params["name"].get<std::string>()));
  }
  return tools;
}

}  // namespace

void RegisterOAuthRoutes(Impl* im, httplib::Server& svr) {
  if (!im->options.oauth) return;
  // im->options outlives the server, so the handlers may hold the reference.
  const OAuthResourceServer& oauth = *im->options.oauth;
  ServeMetadata(svr, oauth, "/.well-known/oauth-protected-resource", OAuthResource::kMcp);
  ServeMetadata(svr, oauth, "/.well-known/oauth-protected-resource/mcp", OAuthResource::kMcp);
  ServeMetadata(svr, oauth, "/.well-known/oauth-protected-resource/v1", OAuthResource::kApi);
}

bool HasToolScopes(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
                   const Principal& who) {
  // Static tokens carry no scopes; tool_scopes bind OAuth tokens only.
  if (!o.oauth || !who.oauth() || req.method != "POST") return true;
  std::vector<std::string> needed;
  std::string short_of;  // the first tool refused, for the message
  for (const std::string& tool : CalledTools(req.body)) {
    for (const std::string& scope : o.oauth->ScopesForTool(tool)) {
      if (std::find(needed.begin(), needed.end(), scope) == needed.end()) needed.push_back(scope);
      const bool held = std::find(who.scopes.begin(), who.scopes.end(), scope) != who.scopes.end();
      if (!held && short_of.empty()) short_of = "'" + tool + "' needs the scope " + scope;
    }
  }
  if (short_of.empty()) return true;
  // Before the call reaches the gateway: nothing is submitted, so the
  // client's retry with a larger token is the call's first appearance.
  Error(res, 403, "E_INSUFFICIENT_SCOPE", short_of);
  res.set_header("WWW-Authenticate", o.oauth->InsufficientScope(OAuthResource::kMcp, needed));
  return false;
}

}  // namespace http_api
}  // namespace tollgate
