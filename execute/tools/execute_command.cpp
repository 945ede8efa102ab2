// execute_command {command, args?: [string], stdin?: string, timeout?: s,
// timeout_ms?, role?: viewer|operator|admin} in two forms (docs/tools.md):
// - an argv (args given, or command one bare word): the program runs with
//   exactly those arguments, no shell, so `;`, `|`, `$(...)` are plain bytes;
// - a command line (the seeds' "pytest tests/ -v", "git log | head -5"):
//   read by core/shell_line.h exactly as decide read it. A line it cannot
//   analyse statically ($(...), $X, eval, here-docs...) never runs
//   unexamined: only under decide's ask for it (rule command:unanalysable),
//   granted by an approver, and then as written. One command without
//   redirections runs as an argv;
//   otherwise /bin/dash runs the line re-rendered with every word
//   single-quoted and each program by its path (`set -f`, no expansion of
//   any kind), so each argv is exactly the one checked.
// Every simple command is checked. Refused (E_CMD_NOT_ALLOWED): a command
// not on execute.commands.allow (the role's: a viewer only a few read-only
// ones, an admin granted by the policy also commands.admin_allow),
// anything on the interpreter blocklist (checked on the name and on the
// resolved file, so a symlink named `ls` to bash is caught), options that
// make a program run another (find -exec, tar --to-command, sort
// --compress-prog: GNU abbreviations included), and destructive patterns
// (rm -rf /, mkfs, dd of=/dev/..., shutdown). A redirection outside the
// workspace: E_PATH_FORBIDDEN. Runs in the agent's workspace under
// RunSandboxed (execute/sandbox.h: bubblewrap, no network, the workspace
// the only writable path). Mutating (no way to know it is not).
#include "execute/tools/execute_command.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "core/invocation.h"
#include "core/shell_line.h"
#include "execute/sandbox.h"
#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {

std::string Basename(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// Whether `name` is `entry` or a versioned form of it (python3.11, perl5.36).
bool MatchesBlocked(const std::string& name, const std::string& entry) {
  if (name == entry) return true;
  if (name.size() <= entry.size() || name.compare(0, entry.size(), entry) != 0) return false;
  for (size_t i = entry.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])) && name[i] != '.' && name[i] != '-') return false;
  }
  return true;
}

// Options by which programs run another program or script (docs/sandbox.md
// has the table and why). GNU getopt takes any unambiguous prefix of a long
// option (`--compress-prog=sh` is sort's --compress-program) and its value
// as `--opt=v` or as the next argument; the option itself is refused either
// way. Under bwrap these programs could reach nothing outside the workspace;
// refusing them keeps a shell from ever starting at all.
namespace {

struct OptionRule {
  const char* command;                    // basename; "" = every command
  std::vector<const char*> long_options;  // without "--"
  const char* short_options;              // letters, in any cluster (-xvI)
  std::vector<const char*> exact;         // single-dash words (find's -exec), exact
  bool old_style = false;                 // argv[1] without '-' is a cluster (tar cIf)
};

const std::vector<OptionRule>& OptionRules() {
  static const std::vector<OptionRule> rules = {
      {"sort", {"compress-program"}, "", {}},
      {"tar",
       {"to-command", "use-compress-program", "checkpoint-action", "info-script", "new-volume-script",
        "rmt-command", "rsh-command"},
       "IF",
       {},
       true},
      {"find", {}, "", {"-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}},
      {"diff", {"paginate"}, "l", {}},
      {"sdiff", {"diff-program"}, "", {}},
      {"split", {"filter"}, "", {}},
      {"git", {"upload-pack", "receive-pack", "exec-path", "config-env", "exec"}, "c", {}},
      {"rsync", {"rsh", "rsync-path"}, "e", {}},
      {"zip", {"unzip-command"}, "", {"-TT"}},
      {"man", {"pager", "html", "preprocessor"}, "PHp", {}},
      {"cpio", {"rsh-command"}, "", {}},
      // Any command: long options that run something wherever they appear.
      // A prefix counts once it reaches past the first '-' (`--to-c`,
      // `--compress-p`), a one-word name only whole: shorter ones are other
      // programs' own options (sort --check, rsync --compress).
      {"",
       {"checkpoint-action", "to-command", "use-compress-program", "compress-program", "upload-pack",
        "receive-pack", "rsh-command", "unzip-command", "info-script", "new-volume-script", "rmt-command",
        "rsync-path", "pager", "extcmd", "filter", "external", "diff-program", "exec-path"},
       "",
       {"-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}},
  };
  return rules;
}

}  // namespace

// "" when fine, else the refused option and what it abbreviates.
std::string RefusedOption(const std::vector<std::string>& argv) {
  const std::string cmd = Basename(argv[0]);
  for (const auto& rule : OptionRules()) {
    const bool any = rule.command[0] == '\0';
    if (!any && cmd != rule.command) continue;
    for (size_t i = 1; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      for (const char* e : rule.exact) {
        if (a == e) return a;
      }
      if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
        const std::string name =
            a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
        for (const char* o : rule.long_options) {
          const std::string full = o;
          const size_t dash = full.find('-');
          const size_t min_prefix = !any ? 1 : dash == std::string::npos ? full.size() : dash + 2;
          if (name.size() >= min_prefix && full.compare(0, name.size(), name) == 0) {
            return name == o ? "--" + name : "--" + name + " (--" + o + ")";
          }
        }
      } else if (*rule.short_options != '\0' &&
                 ((a.size() > 1 && a[0] == '-' && a[1] != '-') || (rule.old_style && i == 1 && !a.empty()))) {
        // A cluster: every letter may be an option, whatever follows it.
        for (char c : a) {
          if (c != '-' && std::strchr(rule.short_options, c) != nullptr)
            return "-" + std::string(1, c) + " (in " + a + ")";
        }
      }
    }
  }
  return "";
}

// "" when fine, else why `argv` is destructive.
std::string DestructiveReason(const std::vector<std::string>& argv) {
  const std::string cmd = Basename(argv[0]);
  if (cmd.rfind("mkfs", 0) == 0 || cmd == "fdisk" || cmd == "parted" || cmd == "wipefs" || cmd == "shred") {
    return "formats or wipes disks";
  }
  if (cmd == "shutdown" || cmd == "reboot" || cmd == "halt" || cmd == "poweroff" || cmd == "init" ||
      cmd == "telinit" || cmd == "systemctl") {
    return "controls the machine";
  }
  bool recursive = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--recursive" || (a.size() > 1 && a[0] == '-' && a[1] != '-' &&
                               (a.find('r') != std::string::npos || a.find('R') != std::string::npos))) {
      recursive = true;
    }
  }
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    const bool root_like = a == "/" || a == "/*" || a == "~" || a == "~/" || a == "." || a == ".." ||
                           a == "*" || a == "--no-preserve-root";
    if ((cmd == "rm" || cmd == "chmod" || cmd == "chown" || cmd == "chgrp") && recursive && root_like) {
      return cmd + " -r on " + a;
    }
    if (cmd == "dd" && a.rfind("of=/dev/", 0) == 0) return "dd onto a device";
    if (a.find(":(){") != std::string::npos) return "fork bomb";
  }
  if (cmd == "kill" || cmd == "pkill" || cmd == "killall") return "signals other processes";
  return "";
}

namespace {

enum class Role { kViewer, kOperator, kAdmin };

// What a viewer may run (and only if the allowlist names it too): programs
// that read, and git's reading subcommands.
bool ViewerMay(const std::vector<std::string>& argv, std::string* why) {
  static const std::set<std::string> kReaders = {
      "ls",        "cat",    "head", "tail",  "wc",    "grep",   "cut", "tr",       "echo",
      "date",      "pwd",    "true", "false", "stat",  "du",     "df",  "basename", "dirname",
      "sha256sum", "md5sum", "diff", "file",  "uname", "whoami", "id",  "seq"};
  static const std::set<std::string> kGitReads = {"status", "diff",     "log",      "show",
                                                  "blame",  "ls-files", "rev-parse"};
  const std::string cmd = Basename(argv[0]);
  if (cmd == "git") {
    if (argv.size() < 2 || kGitReads.count(argv[1]) == 0) {
      *why = "role viewer runs only git " +
             std::string("status, diff, log, show, blame, ls-files and rev-parse");
      return false;
    }
    for (const auto& a : argv) {
      if (a.rfind("--output", 0) == 0) {
        *why = "role viewer: git " + argv[1] + " " + a + " writes a file";
        return false;
      }
    }
    return true;
  }
  if (kReaders.count(cmd) == 0) {
    *why =
        "role viewer runs only read-only commands (ls, cat, head, tail, wc, grep, git status/diff/log...); "
        "'" +
        cmd + "' is not one";
    return false;
  }
  return true;
}

// Whether `argv` may run for `role`: null with *path (the program as found
// in kSafePath) and *resolved (its real file), or the refusal.
Json CheckCommand(const std::vector<std::string>& argv, Role role, const ExecutePolicy& p, std::string* path,
                  std::string* resolved) {
  const std::string& command = argv[0];
  if (command.empty()) return ToolFail(errc::kInvalidArgs, "a command name is empty");
  if (command[0] == '-') return ToolFail(errc::kInvalidArgs, "command cannot start with '-'");
  if (argv.size() > 257) return ToolFail(errc::kInvalidArgs, "a command has at most 256 arguments");
  for (const auto& a : argv) {
    if (a.size() > 4096) return ToolFail(errc::kInvalidArgs, "each argument is at most 4096 bytes");
  }
  // Allowlist on the name as given (the role's); blocklist on the name and the file.
  auto listed = [&](const std::vector<std::string>& l) {
    return std::find(l.begin(), l.end(), command) != l.end();
  };
  if (!listed(p.command_allowlist) && !(role == Role::kAdmin && listed(p.admin_allowlist))) {
    return ToolFail(errc::kCmdNotAllowed, "'" + ToValidUtf8(command) + "' is not on the command allowlist" +
                                              (role == Role::kAdmin ? " or commands.admin_allow" : ""));
  }
  std::string why;
  if (role == Role::kViewer && !ViewerMay(argv, &why))
    return ToolFail(errc::kCmdNotAllowed, ToValidUtf8(why));
  *path = FindProgram(command);
  if (path->empty()) return ToolFail(errc::kCmdNotAllowed, "'" + ToValidUtf8(command) + "' is not installed");
  char real[PATH_MAX];
  *resolved = realpath(path->c_str(), real) ? real : *path;
  for (const auto& b : p.interpreter_blocklist) {
    if (MatchesBlocked(Basename(command), b) || MatchesBlocked(Basename(*resolved), b)) {
      return ToolFail(errc::kCmdNotAllowed,
                      "'" + ToValidUtf8(command) + "' (" + *resolved + ") is an interpreter or launcher");
    }
  }
  // The rules of the name as given and of the file it resolves to (an
  // allowlisted /opt/tools/srt -> /usr/bin/sort is sort).
  std::string refused = RefusedOption(argv);
  if (refused.empty() && Basename(*resolved) != Basename(command)) {
    std::vector<std::string> as_resolved = argv;
    as_resolved[0] = *resolved;
    refused = RefusedOption(as_resolved);
  }
  if (!refused.empty()) {
    return ToolFail(errc::kCmdNotAllowed,
                    "option " + ToValidUtf8(refused) + " of " + Basename(command) + " runs another program");
  }
  why = DestructiveReason(argv);
  if (!why.empty()) return ToolFail(errc::kCmdNotAllowed, "destructive command refused: " + why);
  return nullptr;
}

// The role asked for (default operator); admin only for an agent the
// execute policy lists. Null, or the refusal.
Json ReadRole(const Json& args, const ToolContext& ctx, Role* role) {
  *role = Role::kOperator;
  if (!args.contains("role")) return nullptr;
  const Json& r = args["role"];
  if (!r.is_string()) return ToolFail(errc::kInvalidArgs, "role must be viewer, operator or admin");
  const std::string name = r.get<std::string>();
  if (name == "viewer") {
    *role = Role::kViewer;
  } else if (name == "admin") {
    const auto& granted = ctx.policy->admin_agents;
    if (std::find(granted.begin(), granted.end(), ctx.org_id + "/" + ctx.agent_id) == granted.end()) {
      return ToolFail(errc::kCmdNotAllowed,
                      "role admin is not granted to agent '" + ctx.org_id + "/" + ctx.agent_id +
                          "': only the policy grants it (execute.commands.admin_agents)");
    }
    *role = Role::kAdmin;
  } else if (name != "operator") {
    return ToolFail(errc::kInvalidArgs, "role must be viewer, operator or admin");
  }
  return nullptr;
}

// The timeout in ms: the seed's `timeout` (seconds, default 30) and/or
// tollgate's timeout_ms, never above the policy's limit. -1 when invalid.
int64_t TimeoutMs(const Json& args, int64_t limit_ms, Json* err) {
  int64_t t = limit_ms;
  const bool has_ms = args.contains("timeout_ms"), has_s = args.contains("timeout");
  if (has_ms) {
    if (!args["timeout_ms"].is_number_integer() || args["timeout_ms"].get<int64_t>() < 1) {
      *err = ToolFail(errc::kInvalidArgs, "timeout_ms must be a positive integer");
      return -1;
    }
    t = std::min(t, args["timeout_ms"].get<int64_t>());
  }
  if (has_s) {
    if (!args["timeout"].is_number_integer() || args["timeout"].get<int64_t>() < 1) {
      *err = ToolFail(errc::kInvalidArgs, "timeout must be a positive integer (seconds)");
      return -1;
    }
    t = std::min(t, std::min<int64_t>(args["timeout"].get<int64_t>(), 86400) * 1000);
  }
  if (!has_ms && !has_s) t = std::min<int64_t>(t, 30000);
  return t;
}

// The shell a command line runs under: dash (POSIX, no brace expansion);
// the gate starts it, an agent never names one.
std::string Dash() {
  for (const char* d : {"/usr/bin/dash", "/bin/dash"}) {
    if (access(d, X_OK) == 0) return d;
  }
  return "";
}

// Whether the sandbox shows `path` without a bind of its own (the system
// directories, execute/sandbox.h).
bool UnderSystem(const std::string& path) {
  for (const char* d : {"/usr/", "/bin/", "/sbin/"}) {
    if (path.rfind(d, 0) == 0) return true;
  }
  return false;
}

// Whether `decision` asked an approver about a line that cannot be analysed
// (decide's step 9b): execute runs an ask only once it was granted.
bool ApprovedUnanalysable(const Json& decision) {
  return decision.is_object() && decision.value("verdict", "") == "ask" &&
         decision.value("rule", "") == "command:unanalysable";
}

// Step 1, what runs: the line's simple commands (the same reading decide
// made). Null, or the refusal.
Json ReadCommandLine(const Json& args, const std::string& command, bool argv_form, const ToolContext& ctx,
                     ShellLine* line) {
  if (argv_form) {
    if (args.contains("args")) {
      const Json& a = args["args"];
      if (!a.is_array() || a.size() > 256)
        return ToolFail(errc::kInvalidArgs, "args must be a list of at most 256 strings");
      for (const auto& x : a) {
        if (!x.is_string() || x.get<std::string>().size() > 4096 ||
            x.get<std::string>().find('\0') != std::string::npos) {
          return ToolFail(errc::kInvalidArgs, "each arg must be a string of at most 4096 bytes, without NUL");
        }
      }
    }
    if (command.find_first_of(" \t\n\r;|&$<>`'\"\\*?(){}[]!~#=") != std::string::npos) {
      return ToolFail(errc::kCmdNotAllowed,
                      "with args, command must be a program name, not a shell line: " + ToValidUtf8(command));
    }
    *line = CommandCallOf(args);
  } else {
    *line = ParseShellLine(command);
    if (line->kind == ShellLine::Kind::kInvalid) {
      return ToolFail(errc::kInvalidArgs, "the command line is not valid: " + line->reason);
    }
    // A line that cannot be analysed runs only as a human approved it:
    // decide asked (it never allows one) and the invocation check made
    // sure this is the line approved. What the parser saw is still checked.
    if (line->kind == ShellLine::Kind::kUnanalysable && !ApprovedUnanalysable(ctx.decision)) {
      return ToolFail(errc::kCmdNotAllowed, "the command line cannot be analysed statically (" +
                                                line->reason +
                                                "), so its commands cannot be checked: it runs only "
                                                "once an approver granted it");
    }
  }
  return nullptr;
}

// Step 2: each simple command and its redirections checked; *paths gets
// each program's path. Null, or the first refusal.
Json CheckEveryCommand(const ShellLine& line, Role role, const ExecutePolicy& p,
                       std::vector<std::string>* paths) {
  for (const auto& c : line.commands) {
    std::string path, resolved;
    if (Json refused = CheckCommand(c.argv, role, p, &path, &resolved); !refused.is_null()) return refused;
    for (const auto& r : c.redirections) {
      if (r.names_file() && !IsWorkspaceRedirectTarget(r.target)) {
        return ToolFail(errc::kPathForbidden,
                        "redirection " + r.op + " '" + ToValidUtf8(r.target) +
                            "': only workspace-relative paths without '..' and /dev/null");
      }
      if (role == Role::kViewer && r.writes() && r.names_file() && r.target != "/dev/null") {
        return ToolFail(errc::kCmdNotAllowed, "role viewer: the redirection " + r.op + " writes a file");
      }
    }
    paths->push_back(path);
  }
  return nullptr;
}

// Step 3: the program the spec runs, and its argv. Null, or the refusal.
Json ChooseProgram(const ShellLine& line, const std::string& command, const std::vector<std::string>& paths,
                   ProcessSpec& spec) {
  static const SimpleCommand kNone;
  const SimpleCommand& only = line.commands.empty() ? kNone : line.commands[0];
  if (!line.ok()) {
    // Approved as written: the line itself, not a rendering of a parse.
    spec.path = Dash();
    if (spec.path.empty())
      return ToolFail(errc::kSandbox, "dash is not installed: a command line cannot run");
    spec.argv = {"dash", "-c", "set -f; " + command};
  } else if (line.commands.size() == 1 && only.redirections.empty()) {
    // One command: run it with its argv, no shell at all.
    spec.path = paths[0];
    spec.argv = only.argv;
  } else {
    // A line: dash runs it rendered with every word single-quoted and each
    // program by its path, so each argv is exactly the one checked.
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!UnderSystem(paths[i])) {
        return ToolFail(errc::kCmdNotAllowed,
                        "'" + ToValidUtf8(line.commands[i].argv[0]) + "' (" + paths[i] +
                            ") is outside /usr, /bin and /sbin: a line of several commands "
                            "runs system programs only (run it alone, with args)");
      }
    }
    spec.path = Dash();
    if (spec.path.empty())
      return ToolFail(errc::kSandbox, "dash is not installed: a command line cannot run");
    spec.argv = {"dash", "-c", "set -f; " + RenderShellLine(line, paths)};
  }
  return nullptr;
}

}  // namespace

Json PrepareCommand(const Json& args, const ToolContext& ctx, Workspace* ws, ProcessSpec* out) {
  const ExecutePolicy& p = *ctx.policy;
  std::string command;
  if (!StringArg(args, "command", &command) || command.empty()) {
    return ToolFail(errc::kInvalidArgs,
                    "command (string) is required: a program with args, or a command line");
  }
  const bool argv_form = IsCommandArgv(args);
  Role role;
  if (Json err = ReadRole(args, ctx, &role); !err.is_null()) return err;
  Json err;

  ShellLine line;
  if (Json refused = ReadCommandLine(args, command, argv_form, ctx, &line); !refused.is_null())
    return refused;
  std::vector<std::string> paths;
  if (Json refused = CheckEveryCommand(line, role, p, &paths); !refused.is_null()) return refused;

  if (!OpenWorkspace(ctx, ws, &err)) return err;
  ProcessSpec& spec = *out;
  if (Json refused = ChooseProgram(line, command, paths, spec); !refused.is_null()) return refused;
  spec.env = {std::string("PATH=") + kSafePath, "HOME=" + ws->path(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
              "TZ=UTC"};
  spec.cwd_fd = ws->fd();
  spec.workspace = ws->path();
  spec.limits = p.limits;
  spec.run_dir = p.run_dir;
  spec.run_as = p.run_as;
  return nullptr;
}

namespace {

class ExecuteCommand : public BuiltinTool {
 public:
  ExecuteCommand() : BuiltinTool("execute_command") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string command;
    if (!StringArg(args, "command", &command) || command.empty()) {
      return ToolFail(errc::kInvalidArgs,
                      "command (string) is required: a program with args, or a command line");
    }
    const bool argv_form = IsCommandArgv(args);
    const std::string shown = argv_form ? CommandLine(args) : command;
    bool ran = false;
    Json result = RunCall(args, ctx, &ran);
    if (!result.contains("meta") || !result["meta"].is_object()) result["meta"] = Json::object();
    result["meta"]["command"] = ToValidUtf8(shown);
    result["meta"]["sandbox"] = ran;
    return result;
  }

 private:
  Json RunCall(const Json& args, const ToolContext& ctx, bool* ran) const {
    const ExecutePolicy& p = *ctx.policy;
    std::string stdin_data;
    if (!StringArg(args, "stdin", &stdin_data, false))
      return ToolFail(errc::kInvalidArgs, "stdin must be a string");
    Json err;
    const int64_t timeout_ms = TimeoutMs(args, p.limits.timeout_ms, &err);
    if (timeout_ms < 0) return err;
    Workspace ws;
    ProcessSpec spec;
    if (Json refused = PrepareCommand(args, ctx, &ws, &spec); !refused.is_null()) return refused;
    spec.stdin_data = stdin_data;
    spec.limits.timeout_ms = static_cast<int>(timeout_ms);
    ProcessResult r;
    Status s = RunSandboxed(spec, &r);
    if (!s.ok()) return FailFrom(s);
    *ran = true;
    // tollgate's fields and the seeds' (returncode: the AI Orchestrator's name).
    Json data{{"exit_code", r.exit_code},
              {"returncode", r.exit_code},
              {"stdout", ToValidUtf8(r.out)},
              {"stderr", ToValidUtf8(r.err)},
              {"stdout_truncated", r.out_truncated},
              {"stderr_truncated", r.err_truncated},
              {"duration_ms", r.duration_ms}};
    if (r.signal != 0) data["signal"] = r.signal;
    Json result;
    if (r.timed_out) {
      result =
          ToolFail(errc::kTimeout, "killed after " + std::to_string(spec.limits.timeout_ms) + " ms", true);
    } else if (r.signal != 0) {
      result = ToolFail(errc::kToolExec, "killed by signal " + std::to_string(r.signal) +
                                             " (a resource limit: CPU, memory, file size)");
    } else if (r.exit_code != 0) {
      result = ToolFail(errc::kToolExec, "exited with status " + std::to_string(r.exit_code));
    } else {
      return ToolOk(data);
    }
    result["data"] = data;
    return result;
  }
};

}  // namespace

std::unique_ptr<Tool> MakeExecuteCommand() { return std::make_unique<ExecuteCommand>(); }

}  // namespace tollgate
