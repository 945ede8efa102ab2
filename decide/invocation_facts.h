// A request as decide's checks see it: the envelope fields, the invocation
// string's inputs (the agent's effective http config), and the arguments
// parsed for argument-level rules (http method and URL, the command name,
// a file tool's path). The strings themselves are built by core/invocation.h,
// shared with execute, so the two cannot compute different invocations.
// Internal to decide; pure.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/shell_line.h"
#include "core/url.h"
#include "decide/compiled_policy.h"

namespace tollgate {

// The agent's effective http_request config: its tier's keys over the org's.
struct EffectiveHttp {
  const std::string* base_url = nullptr;
  const std::string* default_method = nullptr;        // null: GET
  const std::vector<std::string>* methods = nullptr;  // null: GET, HEAD
  bool auto_approve = false;
  const HttpConfig* hosts_from = nullptr;                                   // null: any host
  const std::map<std::string, HttpAlias>* aliases[2] = {nullptr, nullptr};  // the agent's, then the org's
  // The alias named `tool` (the agent's, the org's, then a built-in one:
  // FindBuiltinHttpAlias), or null.
  const HttpAlias* FindAlias(const std::string& tool) const;
};
// `agent` may be null (an agent with no entry).
EffectiveHttp HttpFor(const Policy::Compiled& c, const Tier* agent);
// The base URL relative URLs resolve against, "" for none; `http` may be null.
const std::string& BaseUrlOf(const EffectiveHttp* http);
// The method of a call that names none: http_request.default_method, else GET.
const std::string& DefaultMethodOf(const EffectiveHttp* http);

struct InvocationFacts {
  // The envelope: point into the request, "" when absent.
  const std::string* org;
  const std::string* agent;
  const std::string* session;
  const std::string* request_id;
  const std::string* tool;
  const Json* args;    // {} when absent
  std::string action;  // ActionOf(request) (core/invocation.h)
  // An http_request alias (core/http_alias.h) is decided as the
  // http_request it expands to: `http_args` are then its arguments.
  const HttpAlias* alias = nullptr;
  Json alias_args;
  Status alias_status = Status::Ok();  // why the args do not expand
  // tools/list's probe (DecideInput::probe): an alias's missing arguments
  // leave its URL as configured rather than deny the call.
  bool probe = false;
  const Json* http_args = nullptr;  // args (http_request), &alias_args (an alias), else null
  // From the args (ParseArgs).
  std::string method;  // http_request
  NormalUrl url;       // http_request
  bool url_ok = false;
  std::string url_error;  // why not url_ok
  std::string file_path;  // file tools, normalised
  std::string command;    // execute_command: the command name (the line's first word)
  // execute_command: its simple commands (CommandCallOf, core/invocation.h),
  // whether they come from a command line rather than an argv, and their
  // names (argv[0] without its directory) for `when: command` rules.
  ShellLine line;
  bool command_line = false;
  std::vector<std::string> command_names;
  // (The second subject of file tools, "<tool>:<path>", is Decision::subject.)
};

// The envelope fields of `request`; the facts point into it, so it must
// outlive them.
InvocationFacts ReadEnvelope(const Json& request);
// Resolves `f.tool` as an alias of `http` (f->alias, f->alias_args) and
// returns the call's invocation (core/invocation.h): an alias's is its
// http_request's, or "http_request:METHOD URL-TEMPLATE" when its args do
// not expand (the call is then denied).
std::string ResolveInvocation(const EffectiveHttp& http, InvocationFacts* f);
// Parses the arguments the rules look at. `http` resolves a relative URL
// (the same normalised URL as the invocation, and what execute fetches). A
// file tool's subject "TOOL:PATH" goes to *subject: normalised, so
// "/etc//x" or "/srv/../etc/x" cannot dodge a deny glob.
void ParseArgs(const EffectiveHttp& http, InvocationFacts* f, std::string* subject);

// Whether rule `r`'s tools and `when:` conditions all match. A `command`
// condition holds for a deny or ask rule when any simple command of the
// call is named, for an allow rule when every one is (and the line could
// be analysed).
bool RuleMatches(const Rule& r, const InvocationFacts& f);

}  // namespace tollgate
