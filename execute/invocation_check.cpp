#include "execute/invocation_check.h"

#include <algorithm>

#include "core/invocation.h"
#include "core/messages.h"
#include "core/status.h"
#include "core/tool_catalog.h"

namespace tollgate {

bool SameInvocation(const std::string& decided, const std::string& text) {
  if (decided == text) return true;
  static const std::string kMark = "[REDACTED]";
  if (decided.find(kMark) == std::string::npos) return false;
  // Literal pieces between the marks: the first a prefix, the last a suffix,
  // the others in order, each mark covering at least one byte.
  std::vector<std::string> pieces;
  size_t i = 0;
  for (;;) {
    const size_t m = decided.find(kMark, i);
    pieces.push_back(decided.substr(i, m == std::string::npos ? std::string::npos : m - i));
    if (m == std::string::npos) break;
    i = m + kMark.size();
  }
  const std::string& first = pieces.front();
  const std::string& last = pieces.back();
  if (text.compare(0, first.size(), first) != 0) return false;
  size_t pos = first.size();
  for (size_t k = 1; k + 1 < pieces.size(); ++k) {
    const size_t at = text.find(pieces[k], pos + 1);
    if (at == std::string::npos) return false;
    pos = at + pieces[k].size();
  }
  return text.size() >= pos + 1 + last.size() &&
         text.compare(text.size() - last.size(), last.size(), last) == 0;
}

ResolvedCall ResolveCall(const Json& request, const ExecutePolicy& policy) {
  ResolvedCall call;
  call.tool = request.value("tool", "");
  if (request.contains("args") && request["args"].is_object()) call.args = request["args"];
  // A built-in alias (Kaizen's http_get and kin) keeps its name: its own
  // registry entry runs http_request with the expansion, as a plain call
  // (its method is no grant), and adds Kaizen's fields.
  if (const HttpAlias* b = FindBuiltinHttpAlias(call.tool)) {
    Json expanded;
    Status s = ExpandHttpAlias(*b, call.args, &expanded);
    if (!s.ok()) {
      call.error = ToolResultError(s.code(), s.message(), false);
      return call;
    }
    call.args = std::move(expanded);
    return call;
  }
  if (call.tool.find(':') != std::string::npos || FindBuiltinTool(call.tool) != nullptr) return call;
  auto alias = std::make_shared<HttpAlias>();
  Status s;
  if (!FindHttpAlias(policy.AgentHttp(request.value("org_id", ""), request.value("agent_id", "")), call.tool,
                     alias.get(), &s))
    return call;
  Json expanded;
  if (s.ok()) s = ExpandHttpAlias(*alias, call.args, &expanded);
  if (!s.ok()) {
    call.error = ToolResultError(s.code(), s.message(), false);
    return call;
  }
  call.tool = "http_request";
  call.args = std::move(expanded);
  call.alias = std::move(alias);
  return call;
}

Json CheckDecidedInvocation(const Json& request, const ResolvedCall& call, const Json& decision,
                            const ExecutePolicy& policy) {
  if (!decision.is_object())
    return ToolResultError(errc::kDecisionMismatch, "no decision to check the call against", false);
  const std::string& tool = call.tool;
  const Json& args = call.args;
  const Json http = policy.AgentHttp(request.value("org_id", ""), request.value("agent_id", ""));
  std::string method = call.alias ? call.alias->method : http.value("default_method", "GET");
  std::transform(method.begin(), method.end(), method.begin(), ::toupper);
  const std::string as = FindBuiltinHttpAlias(tool) ? "http_request" : tool;  // http_get and kin
  const std::string action = ActionOf(request);
  const std::string inv = BuildInvocation(as, args, http.value("base_url", ""), method, action);
  const std::string decided = decision.value("invocation", "");
  if (!SameInvocation(decided, inv)) {
    return ToolResultError(
        errc::kDecisionMismatch,
        "the call was decided as '" + decided + "' but would run as '" + inv + "'; it was not run", false);
  }
  const std::string subject = FileSubject(tool, args, action);
  const std::string decided_subject = decision.value("subject", "");
  if (!SameInvocation(decided_subject, subject)) {
    return ToolResultError(
        errc::kDecisionMismatch,
        "the call's path was decided as '" + decided_subject + "' but is '" + subject + "'; it was not run",
        false);
  }
  return nullptr;
}

}  // namespace tollgate
