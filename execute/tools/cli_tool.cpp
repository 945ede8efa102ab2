// CLI tools: an operator drops an executable at <tools_dir>/<name>/run (with
// README.md as its description); agents call it as `cli:<name>`. The call's
// args go to its stdin as JSON; it prints one JSON value on stdout: a
// ToolResult ({"success": ..., "data": ..., "error": ..., "meta": {...}},
// meta.cost_usd is the call's actual cost) or any other JSON, taken as data.
// It runs under RunSandboxed with execute.cli_limits, in the agent's
// workspace: bubblewrap, no network (a tool that needs one goes through
// http_request and its address rules), its own directory read-only
// (docs/sandbox.md). Read-only only when decide's decision says so
// (decision.read_only); otherwise mutating — fail closed. Args that do not
// fit its schema.json (shape, core/tool_args.h) are E_INVALID_ARGS.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/tool_args.h"
#include "execute/sandbox.h"
#include "execute/tools/cli_tool.h"
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
  if (f && ParseInputJson(ss.str(), &schema).ok() && schema.is_object() && schema.value("type", "") == "object") {
    return schema;
  }
  return {{"type", "object"}};
}

class CliTool : public Tool {
 public:
  CliTool(std::string name, std::string path, std::string description)
      : name_(std::move(name)), path_(std::move(path)), description_(std::move(description)) {}
  std::string name() const override { return "cli:" + name_; }
  std::string description() const override { return description_; }
  bool ReadOnly(const Json&, const Json& decision) const override {
    auto it = decision.find("read_only");
    return it != decision.end() && it->is_boolean() && it->get<bool>();
  }
  Json Run(const Json& args, const ToolContext& ctx) const override {
    // Its schema.json (the operator's), shape only (core/tool_args.h).
    const Json schema = SchemaBeside(path_);
    if (const std::string why = CheckArgsShape(schema, args); !why.empty()) {
      return ToolFail(errc::kInvalidArgs, "invalid arguments for " + name() + ": " + why);
    }
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    ProcessSpec spec;
    spec.path = path_;
    spec.argv = {path_};
    spec.env = {std::string("PATH=") + kSafePath, "HOME=" + ws.path(), "LANG=C.UTF-8", "TZ=UTC",
                "TOLLGATE_WORKSPACE=" + ws.path(), "TOLLGATE_REQUEST_ID=" + ctx.request_id,
                "TOLLGATE_ORG_ID=" + ctx.org_id, "TOLLGATE_AGENT_ID=" + ctx.agent_id,
                "TOLLGATE_SESSION_ID=" + ctx.session_id};
    spec.cwd_fd = ws.fd();
    spec.workspace = ws.path();
    // The tool's own directory (its README, data files beside `run`).
    spec.read_only = {std::filesystem::path(path_).parent_path().string()};
    spec.stdin_data = args.dump();
    spec.limits = ctx.policy->cli_limits;
    spec.run_dir = ctx.policy->run_dir;
    spec.run_as = ctx.policy->run_as;
    ProcessResult r;
    Status s = RunSandboxed(spec, &r);
    if (!s.ok()) return FailFrom(s);
    const std::string stderr_tail = ToValidUtf8(r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0));
    if (r.timed_out) return ToolFail(errc::kTimeout, name() + " killed after " + std::to_string(spec.limits.timeout_ms) + " ms", true);
    if (r.signal != 0) return ToolFail(errc::kToolExec, name() + " killed by signal " + std::to_string(r.signal));
    if (r.exit_code != 0) {
      return ToolFail(errc::kToolExec, name() + " exited with status " + std::to_string(r.exit_code) + ": " + stderr_tail);
    }
    if (r.out_truncated) return ToolFail(errc::kTooLarge, name() + " printed more than the output limit");
    Json out;
    // Untrusted output: the input limits, so the events wrapping it stay readable.
    if (!ParseInputJson(r.out, &out).ok()) return ToolFail(errc::kToolExec, name() + " did not print JSON: " + stderr_tail);
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
  std::string name_, path_, description_;
};

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace

std::vector<std::unique_ptr<Tool>> DiscoverCliTools(const std::string& dir) {
  std::vector<std::unique_ptr<Tool>> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!ValidName(name) || !entry.is_directory(ec)) continue;
    const std::string run = entry.path().string() + "/run";
    if (access(run.c_str(), X_OK) != 0 || !std::filesystem::is_regular_file(run, ec)) continue;
    std::ifstream readme(entry.path().string() + "/README.md");
    std::stringstream ss;
    ss << readme.rdbuf();
    std::string desc = ss.str().substr(0, 4000);
    out.push_back(std::make_unique<CliTool>(name, run, ToValidUtf8(desc)));
  }
  return out;
}

namespace {

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

}  // namespace

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
