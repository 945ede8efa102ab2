// What executes is what was decided: before execute runs a tool it
// recomputes the call's invocation (and file subject) from the request's
// args with the functions decide used (core/invocation.h), under execute's
// own view of the agent's http base_url, and refuses the call when either
// differs byte for byte from the decision's (E_DECISION_MISMATCH; nothing
// runs). A difference means the two stages read different policies (a
// base_url changed between decide and execute, or an org section execute
// does not apply) or a bug: in both cases what would run is not what the
// policy matched.
//
// A decision whose fields were redacted in the log ("[REDACTED]") matches
// when the recomputed string equals it with each "[REDACTED]" standing for
// a non-empty run of bytes (a secret cannot be a policy's subject).
//
// An http_request alias (core/http_alias.h) runs as the http_request it
// expands to under execute's own view of the agent's aliases, so an alias
// execute does not have, or has otherwise, is a mismatch too. A built-in
// alias (FindBuiltinHttpAlias: Kaizen's http_get and kin) is checked as
// the http_request it expands to and run by its own registry entry.
#pragma once

#include <memory>
#include <string>

#include "core/canonical_json.h"
#include "core/http_alias.h"
#include "execute/config.h"

namespace tollgate {

// The call as execute runs it.
struct ResolvedCall {
  std::string tool;                        // the request's tool; "http_request" for a configured alias
                                           // (a built-in one, http_get..., keeps its name)
  Json args = Json::object();              // its arguments (an alias's expansion)
  std::shared_ptr<const HttpAlias> alias;  // null unless the request names an alias
  Json error;  // null, or the ToolResult ending a call that cannot be formed (nothing runs)
};
ResolvedCall ResolveCall(const Json& request, const ExecutePolicy& policy);

// Null when the call may run, else the ToolResult (E_DECISION_MISMATCH)
// naming both invocations.
Json CheckDecidedInvocation(const Json& request, const ResolvedCall& call, const Json& decision,
                            const ExecutePolicy& policy);

// `text` equals `decided`, or matches it with "[REDACTED]" as a wildcard.
bool SameInvocation(const std::string& decided, const std::string& text);

}  // namespace tollgate
