// bash_command {command} (Kaizen's, HIGH) and bash {command, timeout}
// (Duragent's, HIGH): execute_command's line mode.
// The line is handed to execute_command's own tool as {command}, so it is
// read by the same shell-grammar parser, each simple command checked
// against the allowlist, blocklist and option table, and run in the
// sandbox (docs/tools.md, "execute_command"); no shell the agent names
// ever runs it. The result is execute_command's (exit_code, returncode,
// stdout, stderr, meta.command, meta.sandbox) plus Kaizen's `output`, the
// same as stdout; a failed run (non-zero exit) carries them too.
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class BashCommand : public BuiltinTool {
 public:
  explicit BashCommand(std::string_view name) : BuiltinTool(name), command_(MakeExecuteCommand()) {}

  Json Run(const Json& args, const ToolContext& ctx) const override {
    if (!args.is_object() || !args.contains("command") || !args["command"].is_string() ||
        args["command"].get_ref<const std::string&>().empty()) {
      return ToolFail(errc::kInvalidArgs, "command (a non-empty string) is required");
    }
    Json line{{"command", args["command"]}};
    if (args.contains("timeout")) line["timeout"] = args["timeout"];
    Json r = command_->Run(line, ctx);
    if (r.contains("data") && r["data"].is_object() && r["data"].contains("stdout")) {
      r["data"]["output"] = r["data"]["stdout"];
    }
    return r;
  }

 private:
  std::unique_ptr<Tool> command_;
};

}  // namespace

std::unique_ptr<Tool> MakeBashCommand(std::string_view name) { return std::make_unique<BashCommand>(name); }

}  // namespace tollgate
