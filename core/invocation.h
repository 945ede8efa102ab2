// The invocation of a request, computed by one set of functions for decide
// (what deny/allow globs match and decision.invocation records) and execute
// (which recomputes it before running anything and refuses a call whose
// invocation differs from its decision's byte for byte: E_DECISION_MISMATCH).
//
//   http_request     "http_request:METHOD " + HttpUrl(args, base_url)
//   execute_command  "bash:" + CommandLine(args) (and bash_command: IsCommandTool)
//   cli:NAME         "cli:NAME"
//   mcp:SERVER/TOOL  "mcp:SERVER/TOOL" (an upstream MCP server's tool)
//   anything else    "builtin:" + tool, + ":" + ACTION when the call has one
//                    (ActionOf: Duragent's `builtin:web:search`)
// File tools also have a subject, "TOOL:" + NormalizePath(FilePathArg(args))
// (empty when the call has no path); a built-in called with an action has
// the subject "builtin:TOOL", so a glob on the tool holds for every action.
// Deny and allow globs match either string. Pure, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/canonical_json.h"
#include "core/shell_line.h"
#include "core/url.h"

namespace tollgate {

// args.method upper-cased; `default_method` (the policy's
// http_request.default_method, upper-cased) when absent.
std::string HttpMethod(const Json& args, const std::string& default_method = "GET");
// http_request's target as the call gives it: args.url, else args.path (the
// MVP seed's name for the same thing); "" when neither is a string.
std::string HttpUrlArg(const Json& args);
// args.url resolved against `base_url` (may be empty; its path is taken as a
// directory, i.e. a missing trailing '/' is added) and normalised
// (core/url.h), with args.query's pairs appended in key order (non-string
// values as JSON). False with *why when the URL is not a valid http(s) URL;
// *out is then args.url as given, so the invocation still names it.
bool HttpUrl(const Json& args, const std::string& base_url, NormalUrl* url, std::string* out,
             std::string* why);
// args.command, then each string of args.args, joined by single spaces.
std::string CommandLine(const Json& args);
// The tools whose call is a command (execute_command, Kaizen's bash_command,
// Duragent's bash):
// one invocation form ("bash:" + the line) and one policy for both.
bool IsCommandTool(std::string_view tool);
// execute_command's two forms. An argv (args.args given, or args.command
// one bare word): the program runs with exactly those arguments, no shell.
// Otherwise args.command is a command line (core/shell_line.h), run by a
// shell the gate starts, and every simple command in it is what a policy
// must hold for (docs/policy.md, "Command lines").
bool IsCommandArgv(const Json& args);
// The simple commands of an execute_command call: an argv form is the one
// command {command, args...} (kOk), a line is ParseShellLine(command).
ShellLine CommandCallOf(const Json& args);
// args.path, args.directory, args.dir or args.base (search_directory's): the
// first non-empty string.
std::string FilePathArg(const Json& args);
// A request's action: args.action when it is a string (Duragent's built-ins
// take it there), else the request's own top-level `action`, else "".
// Ingest refuses a request whose two differ.
std::string ActionOf(const Json& request);
// The invocation string (above). `action` is ActionOf(request).
std::string BuildInvocation(const std::string& tool, const Json& args, const std::string& base_url,
                            const std::string& default_method = "GET", const std::string& action = "");
// "TOOL:normalised path" for file tools with a path; "builtin:TOOL" for a
// built-in called with an action; else "".
std::string FileSubject(const std::string& tool, const Json& args, const std::string& action = "");

// A policy's tool name or glob in the MCP clients' spelling rewritten to
// ours: "mcp__S__T" -> "mcp:S/T", "mcp__S" -> "mcp:S/*", "mcp__*" ->
// "mcp:*"; "mcp__kaizen_builtin__X" (Kaizen's builtin server: tollgate's
// own built-ins; CanonicalToolName) -> "X". Anything else is returned as
// is (the policy compiler refuses other mcp__kaizen_builtin spellings).
std::string McpToolPattern(const std::string& pattern);

}  // namespace tollgate
