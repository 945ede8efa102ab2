#include "execute/tools/qa_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "execute/sandbox.h"
#include "execute/tools/file_common.h"

namespace tollgate::qa {
namespace {

// `file` beneath the workspace, or false.
bool Exists(const Workspace& ws, const std::string& file) {
  int fd = -1;
  if (!ws.OpenBeneath(file, O_PATH, 0, &fd).ok()) return false;
  close(fd);
  return true;
}

bool FindProject(const Workspace& ws, const std::string& part, Project* out, Json* error) {
  const bool python = part == "backend";
  const std::vector<std::string> markers =
      python ? std::vector<std::string>{"pyproject.toml", "requirements.txt", "setup.py"}
             : std::vector<std::string>{"package.json"};
  for (const std::string& dir : {part, std::string(".")}) {
    Project p{part, python ? "python" : "node", dir, Json()};
    for (const auto& m : markers) {
      if (!Exists(ws, p.In(m))) continue;
      if (!python) {
        int fd = -1;
        std::string text;
        Status s = ws.OpenBeneath(p.In(m), O_RDONLY, 0, &fd);
        if (s.ok()) {
          s = ReadCapped(fd, 1 << 20, &text);
          close(fd);
        }
        if (!s.ok() || text.size() > (1 << 20) || !ParseInputJson(text, &p.package).ok() ||
            !p.package.is_object()) {
          *error = ToolFail(errc::kToolExec, p.In(m) + " is not a JSON object of at most 1 MiB");
          return false;
        }
      }
      *out = std::move(p);
      return true;
    }
  }
  *error = ToolFail(
      kProjectNotFound,
      python ? "no Python project for target backend: no pyproject.toml, requirements.txt or setup.py in "
               "backend/ or the workspace root"
             : "no Node project for target frontend: no package.json in frontend/ or the workspace root");
  return false;
}

// Shell-style quoting for meta.command (only to show it: nothing parses it).
std::string Quote(const std::string& a) {
  if (!a.empty() &&
      a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
          std::string::npos) {
    return a;
  }
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string CommandLine(const Command& c) {
  std::string line = c.program;
  for (const auto& a : c.args) line += " " + Quote(a);
  return line;
}

// One part run (or not: error set).
struct Outcome {
  Project project;
  std::string command;
  ProcessResult r;
  Json error;  // null when it ran
  int timeout_ms = 0;
};

void Run(const Workspace& ws, const ToolContext& ctx, const Command& c, Outcome* o) {
  o->command = CommandLine(c);
  const std::string path = FindProgram(c.program);
  if (path.empty()) {
    o->error = NotFound(c.program + " is not installed on this executor (looked in " + kSafePath + ")");
    return;
  }
  const ExecutePolicy& p = *ctx.policy;
  ProcessSpec spec;
  spec.path = path;
  spec.argv = {c.program};
  spec.argv.insert(spec.argv.end(), c.args.begin(), c.args.end());
  // HOME and every cache in the sandbox's private /tmp: the workspace gets
  // only what the program itself writes there.
  const std::string parent = ws.path().substr(0, ws.path().rfind('/'));
  spec.env = {std::string("PATH=") + kSafePath,
              "HOME=/tmp",
              "LANG=C.UTF-8",
              "LC_ALL=C.UTF-8",
              "TZ=UTC",
              "CI=1",
              "NO_COLOR=1",
              "PYTHONDONTWRITEBYTECODE=1",
              "PYTHONPYCACHEPREFIX=/tmp/pycache",
              "MYPY_CACHE_DIR=/tmp/mypy_cache",
              "RUFF_CACHE_DIR=/tmp/ruff_cache",
              "BLACK_CACHE_DIR=/tmp/black_cache",
              "npm_config_cache=/tmp/npm_cache",
              "npm_config_update_notifier=false",
              "npm_config_fund=false",
              "npm_config_audit=false",
              "npm_config_offline=true",
              "GIT_CONFIG_NOSYSTEM=1",
              "GIT_CONFIG_GLOBAL=/dev/null",
              "GIT_TERMINAL_PROMPT=0",
              "GIT_CEILING_DIRECTORIES=" + parent};
  spec.cwd_fd = ws.fd();
  spec.workspace = ws.path();
  spec.limits = p.qa_limits;
  spec.run_dir = p.run_dir;
  spec.run_as = p.run_as;
  o->timeout_ms = spec.limits.timeout_ms;
  Status s = RunSandboxed(spec, &o->r);
  if (!s.ok()) o->error = FailFrom(s);
}

// The part's fields (its output too when `with_output`).
Json Fields(const Outcome& o, bool with_output) {
  Json d{{"project", o.project.type}, {"path", o.project.dir}, {"command", o.command}};
  if (!o.error.is_null()) {
    d["success"] = false;
    d["error"] = o.error["error"];
    return d;
  }
  d["returncode"] = o.r.exit_code;
  d["exit_code"] = o.r.exit_code;
  d["success"] = !o.r.timed_out && o.r.signal == 0 && o.r.exit_code == 0;
  if (with_output) {
    d["stdout"] = ToValidUtf8(o.r.out);
    d["stderr"] = ToValidUtf8(o.r.err);
  }
  d["stdout_truncated"] = o.r.out_truncated;
  d["stderr_truncated"] = o.r.err_truncated;
  d["duration_ms"] = o.r.duration_ms;
  if (o.r.signal != 0) d["signal"] = o.r.signal;
  return d;
}

// The error of a part that ran and failed, or null.
Json Failure(const Outcome& o) {
  if (!o.error.is_null()) return o.error;
  const std::string program = o.command.substr(0, o.command.find(' '));
  if (o.r.timed_out)
    return ToolFail(errc::kTimeout, program + " killed after " + std::to_string(o.timeout_ms) + " ms", true);
  if (o.r.signal != 0) {
    return ToolFail(errc::kToolExec, program + " killed by signal " + std::to_string(o.r.signal) +
                                         " (a resource limit: CPU, memory, file size)");
  }
  if (o.r.exit_code != 0)
    return ToolFail(errc::kToolExec, program + " exited with status " + std::to_string(o.r.exit_code));
  return Json();
}

Json Finish(const std::vector<Outcome>& outcomes, const std::string& target) {
  Json data, error;
  std::string commands;
  if (outcomes.size() == 1) {
    const Outcome& o = outcomes[0];
    if (!o.error.is_null()) return o.error;  // nothing ran
    data = Fields(o, true);
    data.erase("success");
    error = Failure(o);
    commands = o.command;
  } else {
    std::string out, err, why;
    int returncode = 0;
    data["parts"] = Json::object();
    for (const Outcome& o : outcomes) {
      data["parts"][o.project.part] = Fields(o, false);
      commands += (commands.empty() ? "" : "; ") + o.command;
      const std::string head = "== " + o.project.part + ": " + o.command + " ==\n";
      if (o.error.is_null()) {
        out += head + ToValidUtf8(o.r.out) + (o.r.out.empty() || o.r.out.back() == '\n' ? "" : "\n");
        err += head + ToValidUtf8(o.r.err) + (o.r.err.empty() || o.r.err.back() == '\n' ? "" : "\n");
      }
      Json f = Failure(o);
      if (f.is_null()) continue;
      if (error.is_null()) error = f;
      if (returncode == 0) returncode = o.error.is_null() ? o.r.exit_code : -1;
      why += (why.empty() ? "" : "; ") + o.project.part + ": " + f["error"]["message"].get<std::string>();
    }
    if (!error.is_null()) error["error"]["message"] = why;
    std::string types;
    for (const Outcome& o : outcomes) types += (types.empty() ? "" : "+") + o.project.type;
    data["stdout"] = out;
    data["stderr"] = err;
    data["returncode"] = returncode;
    data["exit_code"] = returncode;
    data["project"] = types;
    data["success"] = error.is_null();
  }
  data["target"] = target;
  Json result = error.is_null() ? ToolOk(data) : error;
  result["data"] = data;
  result["meta"]["command"] = commands;
  result["meta"]["sandbox"] = true;
  return result;
}

}  // namespace

bool Project::Has(const Workspace& ws, const std::string& file) const { return Exists(ws, In(file)); }

bool Project::HasScript(const std::string& name) const {
  return package.is_object() && package.contains("scripts") && package["scripts"].is_object() &&
         package["scripts"].contains(name) && package["scripts"][name].is_string();
}

Json NotFound(const std::string& what) { return ToolFail(kProgramNotFound, what); }

Json RunQa(const Json& args, const ToolContext& ctx, const std::vector<std::string>& targets,
           const CommandFor& command) {
  std::string target;
  if (!StringArg(args, "target", &target) ||
      std::find(targets.begin(), targets.end(), target) == targets.end()) {
    std::string list;
    for (const auto& t : targets) list += (list.empty() ? "" : ", ") + t;
    return ToolFail(errc::kInvalidArgs, "target is required: one of " + list);
  }
  Workspace ws;
  Json err;
  if (!OpenWorkspace(ctx, &ws, &err)) return err;
  const std::vector<std::string> parts =
      target == "all" ? std::vector<std::string>{"backend", "frontend"} : std::vector<std::string>{target};
  std::vector<Outcome> outcomes;
  for (const auto& part : parts) {
    Outcome o;
    if (!FindProject(ws, part, &o.project, &err)) {
      if (target != "all" || err["error"]["code"] != kProjectNotFound) return err;
      continue;  // `all`: the parts the workspace has
    }
    Command c;
    if (!command(ws, o.project, &c, &o.error)) {
      o.command = "";
      outcomes.push_back(std::move(o));
      continue;
    }
    Run(ws, ctx, c, &o);
    outcomes.push_back(std::move(o));
  }
  if (outcomes.empty()) {
    return ToolFail(kProjectNotFound,
                    "no project for target all: no Python project (pyproject.toml, requirements.txt "
                    "or setup.py) and no Node project (package.json) in backend/, frontend/ or the "
                    "workspace root");
  }
  return Finish(outcomes, target);
}

Json RunGit(const ToolContext& ctx, const std::vector<std::string>& args) {
  Workspace ws;
  Json err;
  if (!OpenWorkspace(ctx, &ws, &err)) return err;
  if (!Exists(ws, ".git"))
    return ToolFail(kProjectNotFound, "the workspace is not a git repository (no .git at its root)");
  Command c{"git",
            {"--no-pager", "--no-optional-locks", "-c", "safe.directory=*", "-c", "core.fsmonitor=false",
             "-c", "core.hooksPath=/dev/null", "-c", "color.ui=false"}};
  c.args.insert(c.args.end(), args.begin(), args.end());
  Outcome o;
  o.project = Project{"workspace", "git", ".", Json()};
  Run(ws, ctx, c, &o);
  return Finish({o}, "workspace");
}

}  // namespace tollgate::qa
