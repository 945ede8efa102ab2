// CLI tools: an operator drops an executable at <tools_dir>/<name>/run (or
// run.*, with README.md as its description); agents call it as `cli:<name>`. The call's
// args go to its stdin as JSON; it prints one JSON value on stdout: a
// ToolResult ({"success": ..., "data": ..., "error": ..., "meta": {...}},
// meta.cost_usd is the call's actual cost) or any other JSON, taken as data.
// It runs under RunSandboxed with execute.cli_limits, in the agent's
// workspace: bubblewrap, no network (a tool that needs one goes through
// http_request and its address rules), its own directory read-only
// (docs/sandbox.md). Read-only only when decide's decision says so
// (decision.read_only); otherwise mutating — fail closed. Args that do not
// fit its schema.json (shape, core/tool_args.h) are E_INVALID_ARGS.
// An agent-written tool (CliSource::kAgentWritten) runs only when its bytes
// are the ones decide bound the call to (decision.tool_sha256), from a
// private copy the agent cannot change in between (E_DECISION_MISMATCH).
#include "execute/tools/cli_tool.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/sha256.h"
#include "core/tool_args.h"
#include "execute/sandbox.h"
#include "execute/tools/file_common.h"

namespace tollgate {
namespace {

// <dir>/schema.json beside a tool's `run`, when it is an object schema;
// else {"type": "object"} (anything goes).
Json SchemaBeside(const std::string& run_path) {
  std::ifstream f(std::filesystem::path(run_path).parent_path() / "schema.json");
  std::stringstream ss;
  ss << f.rdbuf();
  Json schema;
  if (f && ParseInputJson(ss.str(), &schema).ok() && schema.is_object() &&
      schema.value("type", "") == "object") {
    return schema;
  }
  return {{"type", "object"}};
}

// The whole file, when it is a regular file of at most 1 MiB (no symlink).
bool ReadSmallFile(const std::string& path, std::string* out) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) return false;
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return static_cast<bool>(f) || out->empty();
}

// A private read-only copy of an agent-written tool's verified bytes: the
// agent's later writes cannot change what runs. Removed with its object.
class PrivateCopy {
 public:
  bool Make(const std::string& bytes, const std::string& leaf) {
    char tmpl[] = "/tmp/tollgate-cli-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return false;
    dir_ = tmpl;
    path_ = dir_ + "/" + leaf;
    std::ofstream f(path_, std::ios::binary);
    f << bytes;
    f.close();
    return f && chmod(path_.c_str(), 0555) == 0 && chmod(dir_.c_str(), 0555) == 0;
  }
  ~PrivateCopy() {
    if (dir_.empty()) return;
    chmod(dir_.c_str(), 0700);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

class CliTool : public Tool {
 public:
  explicit CliTool(CliToolFile f) : f_(std::move(f)) {}
  std::string name() const override { return "cli:" + f_.name; }
  std::string description() const override { return f_.readme; }
  bool ReadOnly(const Json&, const Json& decision) const override {
    auto it = decision.find("read_only");
    return it != decision.end() && it->is_boolean() && it->get<bool>();
  }
  Json Run(const Json& args, const ToolContext& ctx) const override {
    // Its schema.json (the operator's), shape only (core/tool_args.h).
    const Json schema = SchemaBeside(f_.run_path);
    if (const std::string why = CheckArgsShape(schema, args); !why.empty()) {
      return ToolFail(errc::kInvalidArgs, "invalid arguments for " + name() + ": " + why);
    }
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    std::string program = f_.run_path;
    std::string visible = std::filesystem::path(f_.run_path).parent_path().string();
    PrivateCopy copy;
    if (f_.source == CliSource::kAgentWritten) {
      const std::string decided = ctx.decision.is_object() ? ctx.decision.value("tool_sha256", "") : "";
      std::string bytes;
      if (!ReadSmallFile(f_.run_path, &bytes))
        return ToolFail(errc::kToolExec, name() + " is gone or unreadable");
      if (decided.empty() || Sha256Hex(bytes) != decided) {
        return ToolFail(errc::kDecisionMismatch,
                        name() +
                            " is an agent-written tool whose file is not the one decided (call reload_tools, "
                            "then call it again); it was not run");
      }
      if (!copy.Make(bytes, std::filesystem::path(f_.run_path).filename().string())) {
        return ToolFail(errc::kToolExec, "could not stage " + name());
      }
      program = copy.path();
      visible = copy.dir();
    }
    ProcessSpec spec;
    spec.path = f_.interpreter.empty() ? program : f_.interpreter;
    spec.argv = f_.interpreter.empty() ? std::vector<std::string>{program}
                                       : std::vector<std::string>{f_.interpreter, program};
    spec.env = {std::string("PATH=") + kSafePath,
                "HOME=" + ws.path(),
                "LANG=C.UTF-8",
                "TZ=UTC",
                "TOLLGATE_WORKSPACE=" + ws.path(),
                "TOLLGATE_REQUEST_ID=" + ctx.request_id,
                "TOLLGATE_ORG_ID=" + ctx.org_id,
                "TOLLGATE_AGENT_ID=" + ctx.agent_id,
                "TOLLGATE_SESSION_ID=" + ctx.session_id};
    spec.cwd_fd = ws.fd();
    spec.workspace = ws.path();
    // The tool's own directory (its README, data files beside `run`).
    spec.read_only = {visible};
    spec.stdin_data = args.dump();
    spec.limits = ctx.policy->cli_limits;
    spec.run_dir = ctx.policy->run_dir;
    spec.run_as = ctx.policy->run_as;
    ProcessResult r;
    Status s = RunSandboxed(spec, &r);
    if (!s.ok()) return FailFrom(s);
    const std::string stderr_tail = ToValidUtf8(r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0));
    if (r.timed_out)
      return ToolFail(errc::kTimeout,
                      name() + " killed after " + std::to_string(spec.limits.timeout_ms) + " ms", true);
    if (r.signal != 0)
      return ToolFail(errc::kToolExec, name() + " killed by signal " + std::to_string(r.signal));
    if (r.exit_code != 0) {
      return ToolFail(errc::kToolExec,
                      name() + " exited with status " + std::to_string(r.exit_code) + ": " + stderr_tail);
    }
    if (r.out_truncated) return ToolFail(errc::kTooLarge, name() + " printed more than the output limit");
    Json out;
    // Untrusted output: the input limits, so the events wrapping it stay readable.
    if (!ParseInputJson(r.out, &out).ok())
      return ToolFail(errc::kToolExec, name() + " did not print JSON: " + stderr_tail);
    if (!out.is_object() || !out.contains("success") || !out["success"].is_boolean()) return ToolOk(out);
    Json result = out["success"].get<bool>() ? ToolOk(out.value("data", Json())) : Json();
    if (!out["success"].get<bool>()) {
      Json e = out.value("error", Json::object());
      result = ToolFail(e.is_object() ? e.value("code", errc::kToolExec) : errc::kToolExec,
                        e.is_object() ? e.value("message", "failed") : "failed",
                        e.is_object() && e.value("recoverable", false));
      result["data"] = out.value("data", Json());
    }
    if (out.contains("meta") && out["meta"].is_object()) {
      for (const auto& [k, v] : out["meta"].items()) result["meta"][k] = v;
    }
    return result;
  }

 private:
  CliToolFile f_;
};

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

// The interpreter of a non-executable run.* file: its #! line's program
// (python3, sh, bash, node; /usr/bin/env X too), else its extension's.
std::string InterpreterOf(const std::string& path, const std::string& bytes) {
  std::string want;
  if (bytes.rfind("#!", 0) == 0) {
    std::string line =
        bytes.substr(2, bytes.find('\n') == std::string::npos ? std::string::npos : bytes.find('\n') - 2);
    std::istringstream in(line);
    std::string prog, arg;
    in >> prog >> arg;
    want = prog.substr(prog.rfind('/') + 1);
    if (want == "env") want = arg;
  } else {
    const std::string ext = std::filesystem::path(path).extension().string();
    want = ext == ".py" ? "python3" : ext == ".sh" ? "sh" : ext == ".js" ? "node" : "";
  }
  if (want == "python") want = "python3";
  if (want != "python3" && want != "sh" && want != "bash" && want != "node") return "";
  return FindProgram(want);
}

// <tool dir>'s `run`, else its first `run.*` by name: a regular file (no
// symlink), executable unless `allow_interpreter` finds it one.
bool FindRun(const std::filesystem::path& tool_dir, bool allow_interpreter, CliToolFile* f) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(tool_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n == "run" || (n.rfind("run.", 0) == 0 && n.size() > 4)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());  // "run" sorts before "run.*"
  for (const std::string& n : names) {
    const std::string path = (tool_dir / n).string();
    std::string bytes;
    if (!ReadSmallFile(path, &bytes)) continue;
    std::string interpreter;
    if (access(path.c_str(), X_OK) != 0) {
      if (!allow_interpreter || (interpreter = InterpreterOf(path, bytes)).empty()) continue;
    }
    f->run_path = path;
    f->interpreter = interpreter;
    f->sha256 = Sha256Hex(bytes);
    return true;
  }
  return false;
}

std::string ReadmeOf(const std::string& path) {
  std::string text;
  if (path.empty() || !ReadSmallFile(path, &text)) return "";
  return ToValidUtf8(text.substr(0, 4000));
}

}  // namespace

const char* CliSourceName(CliSource s) {
  switch (s) {
    case CliSource::kDeclared:
      return "declared";
    case CliSource::kAgent:
      return "agent";
    case CliSource::kWorkspace:
      return "workspace";
    case CliSource::kAgentWritten:
      return "agent_written";
  }
  return "workspace";
}

std::vector<CliToolFile> ScanToolDir(const std::string& dir, CliSource source, bool allow_interpreter) {
  std::vector<CliToolFile> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!ValidName(name) || !entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    CliToolFile f;
    f.name = name;
    f.source = source;
    if (!FindRun(entry.path(), allow_interpreter, &f)) continue;
    f.readme = ReadmeOf(entry.path().string() + "/README.md");
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(),
            [](const CliToolFile& a, const CliToolFile& b) { return a.name < b.name; });
  return out;
}

CliToolFile DeclaredToolFile(const std::string& name, const std::string& command,
                             const std::string& description, const std::string& readme_path) {
  CliToolFile f;
  f.name = name;
  f.run_path = command;
  f.source = CliSource::kDeclared;
  std::string bytes;
  if (ReadSmallFile(command, &bytes)) f.sha256 = Sha256Hex(bytes);
  f.readme = description.empty() ? ReadmeOf(readme_path) : ToValidUtf8(description.substr(0, 4000));
  return f;
}

std::unique_ptr<Tool> MakeCliTool(CliToolFile file) { return std::make_unique<CliTool>(std::move(file)); }

std::vector<std::unique_ptr<Tool>> DiscoverCliTools(const std::string& dir) {
  std::vector<std::unique_ptr<Tool>> out;
  for (CliToolFile& f : ScanToolDir(dir, CliSource::kWorkspace, false))
    out.push_back(MakeCliTool(std::move(f)));
  return out;
}

std::string FirstParagraph(const std::string& text) {
  std::istringstream in(text);
  std::string line, para;
  while (std::getline(in, line)) {
    const bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
    if (para.empty() && (blank || line[0] == '#')) continue;
    if (blank) break;
    if (!para.empty()) para += ' ';
    para += line.substr(0, line.find_last_not_of(" \t\r") + 1);
    if (para.size() > 1000) break;
  }
  return ToValidUtf8(para.substr(0, 1000));
}

std::vector<ToolDescriptor> CliToolDescriptors(const std::string& dir) {
  std::vector<ToolDescriptor> out;
  for (const auto& tool : DiscoverCliTools(dir)) {
    ToolDescriptor d;
    d.name = tool->name();
    d.source = "cli";
    d.description = FirstParagraph(tool->description());
    d.input_schema = SchemaBeside(dir + "/" + d.name.substr(4) + "/run");
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace tollgate
