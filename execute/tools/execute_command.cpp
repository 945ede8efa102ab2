// execute_command {command, args?: [string], stdin?: string, timeout_ms?}:
// runs one allowlisted program with an argv — never a shell, so `;`, `|`,
// `$(...)` are plain bytes in an argument. Refused (E_CMD_NOT_ALLOWED): a
// command not on execute.commands.allow, anything on the interpreter
// blocklist (checked on the name and on the resolved file, so a symlink
// named `ls` to bash is caught), options that make a program run another
// (find -exec, tar --to-command, sort --compress-prog: GNU abbreviations
// included), and destructive patterns (rm -rf /, mkfs, dd of=/dev/...,
// shutdown). Runs in the agent's workspace under RunSandboxed
// (execute/sandbox.h: bubblewrap, no network, the workspace the only
// writable path). Mutating (no way to know it is not).
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstring>

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
  const char* command;                   // basename; "" = every command
  std::vector<const char*> long_options; // without "--"
  const char* short_options;             // letters, in any cluster (-xvI)
  std::vector<const char*> exact;        // single-dash words (find's -exec), exact
  bool old_style = false;                // argv[1] without '-' is a cluster (tar cIf)
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
        const std::string name = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
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
          if (c != '-' && std::strchr(rule.short_options, c) != nullptr) return "-" + std::string(1, c) + " (in " + a + ")";
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
    const bool root_like = a == "/" || a == "/*" || a == "~" || a == "~/" || a == "." || a == ".." || a == "*" ||
                           a == "--no-preserve-root";
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

class ExecuteCommand : public BuiltinTool {
 public:
  ExecuteCommand() : BuiltinTool("execute_command") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    const ExecutePolicy& p = *ctx.policy;
    std::string command, stdin_data;
    if (!StringArg(args, "command", &command) || command.empty()) {
      return ToolFail(errc::kInvalidArgs, "command (string) is required; arguments go in args");
    }
    if (!StringArg(args, "stdin", &stdin_data, false)) return ToolFail(errc::kInvalidArgs, "stdin must be a string");
    if (command.find_first_of(" \t\n\r;|&$<>`'\"\\*?(){}[]!~#=") != std::string::npos) {
      return ToolFail(errc::kCmdNotAllowed, "command must be a program name, not a shell line (no shell runs): " +
                                                ToValidUtf8(command));
    }
    if (command[0] == '-') return ToolFail(errc::kInvalidArgs, "command cannot start with '-'");
    std::vector<std::string> argv{command};
    if (args.contains("args")) {
      const Json& a = args["args"];
      if (!a.is_array() || a.size() > 256) return ToolFail(errc::kInvalidArgs, "args must be a list of at most 256 strings");
      for (const auto& x : a) {
        if (!x.is_string() || x.get<std::string>().size() > 4096 ||
            x.get<std::string>().find('\0') != std::string::npos) {
          return ToolFail(errc::kInvalidArgs, "each arg must be a string of at most 4096 bytes, without NUL");
        }
        argv.push_back(x.get<std::string>());
      }
    }
    // Allowlist on the name as given; blocklist on the name and the file.
    if (std::find(p.command_allowlist.begin(), p.command_allowlist.end(), command) == p.command_allowlist.end()) {
      return ToolFail(errc::kCmdNotAllowed, "'" + command + "' is not on the command allowlist");
    }
    const std::string path = FindProgram(command);
    if (path.empty()) return ToolFail(errc::kCmdNotAllowed, "'" + command + "' is not installed");
    char real[PATH_MAX];
    const std::string resolved = realpath(path.c_str(), real) ? real : path;
    for (const auto& b : p.interpreter_blocklist) {
      if (MatchesBlocked(Basename(command), b) || MatchesBlocked(Basename(resolved), b)) {
        return ToolFail(errc::kCmdNotAllowed, "'" + command + "' (" + resolved + ") is an interpreter or launcher");
      }
    }
    // The rules of the name as given and of the file it resolves to (an
    // allowlisted /opt/tools/srt -> /usr/bin/sort is sort).
    std::string refused = RefusedOption(argv);
    if (refused.empty() && Basename(resolved) != Basename(command)) {
      std::vector<std::string> as_resolved = argv;
      as_resolved[0] = resolved;
      refused = RefusedOption(as_resolved);
    }
    if (!refused.empty()) {
      return ToolFail(errc::kCmdNotAllowed, "option " + ToValidUtf8(refused) + " of " + Basename(command) +
                                                " runs another program");
    }
    const std::string why = DestructiveReason(argv);
    if (!why.empty()) return ToolFail(errc::kCmdNotAllowed, "destructive command refused: " + why);

    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    ProcessSpec spec;
    spec.path = path;
    spec.argv = argv;
    spec.env = {std::string("PATH=") + kSafePath, "HOME=" + ws.path(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TZ=UTC"};
    spec.cwd_fd = ws.fd();
    spec.workspace = ws.path();
    spec.stdin_data = stdin_data;
    spec.limits = p.limits;
    if (args.contains("timeout_ms")) {
      if (!args["timeout_ms"].is_number_integer() || args["timeout_ms"].get<int64_t>() < 1) {
        return ToolFail(errc::kInvalidArgs, "timeout_ms must be a positive integer");
      }
      spec.limits.timeout_ms = static_cast<int>(std::min<int64_t>(spec.limits.timeout_ms, args["timeout_ms"].get<int64_t>()));
    }
    spec.run_dir = ctx.policy->run_dir;
    spec.run_as = p.run_as;
    ProcessResult r;
    Status s = RunSandboxed(spec, &r);
    if (!s.ok()) return FailFrom(s);
    Json data{{"exit_code", r.exit_code},
              {"stdout", ToValidUtf8(r.out)},
              {"stderr", ToValidUtf8(r.err)},
              {"stdout_truncated", r.out_truncated},
              {"stderr_truncated", r.err_truncated},
              {"duration_ms", r.duration_ms}};
    if (r.signal != 0) data["signal"] = r.signal;
    Json result;
    if (r.timed_out) {
      result = ToolFail(errc::kTimeout, "killed after " + std::to_string(spec.limits.timeout_ms) + " ms", true);
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
