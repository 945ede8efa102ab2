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
#pragma once

#include "core/canonical_json.h"
#include "execute/config.h"

namespace tollgate {

// Null when the call may run, else the ToolResult (E_DECISION_MISMATCH)
// naming both invocations.
Json CheckDecidedInvocation(const Json& request, const Json& decision, const ExecutePolicy& policy);

// `text` equals `decided`, or matches it with "[REDACTED]" as a wildcard.
bool SameInvocation(const std::string& decided, const std::string& text);

}  // namespace tollgate
