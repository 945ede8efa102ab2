// The AI Orchestrator seed's QA tools: each runs FIXED programs in the
// agent's workspace under the sandbox (qa_run.h has the flow, the project
// detection and the result):
//   git_status {}                 git status
//   git_diff {staged?}            git diff [--staged] (no external diff, no textconv)
//   run_tests {target}            pytest | npm test
//   run_lint {target}             ruff check | npm run lint
//   run_format {target, check_only? = true}
//                                 black --check | black; npm run format:check
//                                 (else prettier --check) | npm run format (else prettier --write)
//   run_build {target}            python3 -m compileall (a syntax check; the
//                                 sandbox has no network, so nothing is
//                                 installed) | npm run build
//   run_typecheck {target}        mypy | the project's own node_modules/.bin/tsc --noEmit
// target: backend | frontend | all (run_typecheck: backend | frontend).
// Node's local tools run as `node <path>`: the path is resolved inside the
// sandbox, where nothing of the host but the system is visible.
// git_status and git_diff are read-only; the run_* tools run the
// workspace's own code (tests, scripts, build steps) and are mutating.
#include "execute/tools/qa_run.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

using qa::Command;
using qa::NotFound;
using qa::Project;

const std::vector<std::string> kAll{"backend", "frontend", "all"};

// `npm [--prefix DIR] ARGS...`, when package.json has `script`.
bool Npm(const Project& p, const std::string& script, std::vector<std::string> args, Command* c,
         Json* error) {
  if (!p.HasScript(script)) {
    *error = NotFound(p.In("package.json") + " has no \"" + script + "\" script");
    return false;
  }
  c->program = "npm";
  if (p.dir != ".") c->args = {"--prefix", p.dir};
  c->args.insert(c->args.end(), args.begin(), args.end());
  return true;
}

// `node DIR/node_modules/.bin/TOOL ARGS...`, when the project has it.
bool LocalNodeTool(const Workspace& ws, const Project& p, const std::string& tool,
                   std::vector<std::string> args, Command* c, Json* error) {
  const std::string bin = "node_modules/.bin/" + tool;
  if (!p.Has(ws, bin)) {
    *error = NotFound(tool + " is not installed in the project (no " + p.In(bin) +
                      "; the sandbox has no network, so only the project's own copy runs)");
    return false;
  }
  c->program = "node";
  c->args = {p.In(bin)};
  c->args.insert(c->args.end(), args.begin(), args.end());
  return true;
}

// The Python tool's arguments: the project's directory, or "." for the root.
std::vector<std::string> With(std::vector<std::string> args, const Project& p) {
  args.push_back(p.dir);
  return args;
}

class GitStatus : public BuiltinTool {
 public:
  GitStatus() : BuiltinTool("git_status") {}
  Json Run(const Json&, const ToolContext& ctx) const override { return qa::RunGit(ctx, {"status"}); }
};

class GitDiff : public BuiltinTool {
 public:
  GitDiff() : BuiltinTool("git_diff") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    if (args.contains("staged") && !args["staged"].is_boolean()) {
      return ToolFail(errc::kInvalidArgs, "staged must be true or false");
    }
    std::vector<std::string> a{"diff", "--no-ext-diff", "--no-textconv"};
    if (args.value("staged", false)) a.push_back("--staged");
    return qa::RunGit(ctx, a);
  }
};

class RunTests : public BuiltinTool {
 public:
  RunTests() : BuiltinTool("run_tests") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    return qa::RunQa(args, ctx, kAll, [](const Workspace&, const Project& p, Command* c, Json* error) {
      if (p.type == "node") return Npm(p, "test", {"test"}, c, error);
      *c = {"pytest", {"-p", "no:cacheprovider"}};
      if (p.dir != ".") c->args.push_back(p.dir);
      return true;
    });
  }
};

class RunLint : public BuiltinTool {
 public:
  RunLint() : BuiltinTool("run_lint") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    return qa::RunQa(args, ctx, kAll, [](const Workspace&, const Project& p, Command* c, Json* error) {
      if (p.type == "node") return Npm(p, "lint", {"run", "lint"}, c, error);
      *c = {"ruff", With({"check"}, p)};
      return true;
    });
  }
};

class RunFormat : public BuiltinTool {
 public:
  RunFormat() : BuiltinTool("run_format") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    if (args.contains("check_only") && !args["check_only"].is_boolean()) {
      return ToolFail(errc::kInvalidArgs, "check_only must be true or false");
    }
    const bool check = args.value("check_only", true);
    return qa::RunQa(
        args, ctx, kAll, [check](const Workspace& ws, const Project& p, Command* c, Json* error) {
          if (p.type == "python") {
            *c = {"black", With(check ? std::vector<std::string>{"--check"} : std::vector<std::string>{}, p)};
            return true;
          }
          const std::string script = check ? "format:check" : "format";
          if (p.HasScript(script)) return Npm(p, script, {"run", script}, c, error);
          return LocalNodeTool(ws, p, "prettier", {check ? "--check" : "--write", p.dir}, c, error);
        });
  }
};

class RunBuild : public BuiltinTool {
 public:
  RunBuild() : BuiltinTool("run_build") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    return qa::RunQa(args, ctx, kAll, [](const Workspace&, const Project& p, Command* c, Json* error) {
      if (p.type == "node") return Npm(p, "build", {"run", "build"}, c, error);
      // Byte-compiles every module (the bytecode goes to the sandbox's
      // /tmp): a syntax check. Installing dependencies needs a network.
      *c = {"python3", With({"-m", "compileall", "-q", "-x", "(^|/)(\\.|node_modules|__pycache__)"}, p)};
      return true;
    });
  }
};

class RunTypecheck : public BuiltinTool {
 public:
  RunTypecheck() : BuiltinTool("run_typecheck") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    return qa::RunQa(args, ctx, {"backend", "frontend"},
                     [](const Workspace& ws, const Project& p, Command* c, Json* error) {
                       if (p.type == "node")
                         return LocalNodeTool(ws, p, "tsc", {"--noEmit", "-p", p.dir}, c, error);
                       *c = {"mypy", With({}, p)};
                       return true;
                     });
  }
};

}  // namespace

std::unique_ptr<Tool> MakeGitStatus() { return std::make_unique<GitStatus>(); }
std::unique_ptr<Tool> MakeGitDiff() { return std::make_unique<GitDiff>(); }
std::unique_ptr<Tool> MakeRunTests() { return std::make_unique<RunTests>(); }
std::unique_ptr<Tool> MakeRunLint() { return std::make_unique<RunLint>(); }
std::unique_ptr<Tool> MakeRunFormat() { return std::make_unique<RunFormat>(); }
std::unique_ptr<Tool> MakeRunBuild() { return std::make_unique<RunBuild>(); }
std::unique_ptr<Tool> MakeRunTypecheck() { return std::make_unique<RunTypecheck>(); }

}  // namespace tollgate
