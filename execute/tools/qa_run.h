// What the QA tools (qa_tools.cpp: git_status, git_diff, run_tests,
// run_lint, run_format, run_build, run_typecheck; the AI Orchestrator
// seed's) share: finding the project a target names, and running FIXED
// programs (never one the agent names) in the agent's workspace under
// RunSandboxed (execute/sandbox.h: bubblewrap, no network, the workspace
// the only writable path), with execute.qa_limits.
//
// Projects, as the seed detects them (the first that holds a marker):
//   backend   Python: pyproject.toml, requirements.txt or setup.py in
//             backend/, else in the workspace root
//   frontend  Node: package.json in frontend/, else in the workspace root
// Markers are looked up beneath the workspace (openat2), so a symlink that
// leads out is no project.
//
// The ToolResult of one part: data {stdout, stderr, returncode, exit_code
// (the same), stdout_truncated, stderr_truncated, duration_ms, target,
// project (python | node | git), path (the project's directory), command},
// meta {command, sandbox: true}; a non-zero exit is success false with
// E_TOOL_EXEC and the same data, a timeout E_TIMEOUT (recoverable). Target
// `all` runs each part found: data.parts.<part> holds each one's fields but
// its output, which data.stdout / data.stderr hold for all, each part's
// under a "== part: command ==" line; data.success is true when every part
// succeeded.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "execute/tool.h"
#include "execute/workspace.h"

namespace tollgate::qa {

// The program a QA tool runs is not installed (or, for node's local tools,
// not in the project's node_modules; or the package.json script is missing).
inline constexpr const char* kProgramNotFound = "E_PROGRAM_NOT_FOUND";
// The target names a project the workspace does not hold (or, for git, the
// workspace is not a repository).
inline constexpr const char* kProjectNotFound = "E_PROJECT_NOT_FOUND";

struct Project {
  std::string part;  // backend | frontend | workspace (git)
  std::string type;  // python | node | git
  std::string dir;   // relative to the workspace: backend, frontend or "."
  Json package;      // node: package.json, parsed
  // `file` of the project's directory ("backend/pyproject.toml"; "x" for ".").
  std::string In(const std::string& file) const { return dir == "." ? file : dir + "/" + file; }
  // Whether `file` of the project exists beneath the workspace.
  bool Has(const Workspace& ws, const std::string& file) const;
  // Whether package.json names script `name`.
  bool HasScript(const std::string& name) const;
};

// A fixed program (looked up in kSafePath) and its arguments.
struct Command {
  std::string program;
  std::vector<std::string> args;
};

// Builds the command of one project; false with *error (a ToolResult) when
// it cannot be run (a missing program or script).
using CommandFor = std::function<bool(const Workspace&, const Project&, Command*, Json* error)>;

// The QA tool flow: args.target (one of `targets`), the project(s) it
// names, `command` for each, run, the ToolResult.
Json RunQa(const Json& args, const ToolContext& ctx, const std::vector<std::string>& targets,
           const CommandFor& command);

// git with `args` in the workspace (which must hold .git): the repository's
// hooks and fsmonitor off, no pager, no external diff or textconv, no
// system or global config, the repository's owner not checked (files the
// file tools wrote are tollgate's, not the sandbox uid's).
Json RunGit(const ToolContext& ctx, const std::vector<std::string>& args);

// The error of a missing program or script.
Json NotFound(const std::string& what);

}  // namespace tollgate::qa
