// reload_tools {} (Duragent's, LOW): re-scans the agent's tool directories
// and returns every CLI tool it can now call (docs/tools.md, "Tool
// declarations"): {tools: [{name, source, description, sha256}], count,
// shadowed}. The execution.completed of this call is the logged change of
// the agent's tool set: decide folds it (ExecutorTools::ApplyReload), so an
// agent-written tool becomes callable in the same session, bound to the
// bytes found here, and replay knows what was callable when.
#include "execute/registry.h"
#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class ReloadTools : public BuiltinTool {
 public:
  ReloadTools() : BuiltinTool("reload_tools") {}

  Json Run(const Json&, const ToolContext& ctx) const override {
    if (ctx.registry == nullptr)
      return ToolFail(errc::kToolExec, "reload_tools runs only in the execute stage");
    Workspace ws;  // the agent's own tools/ lives in its workspace
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    std::vector<std::string> shadowed;
    Json tools = ctx.registry->AgentTools(ctx.org_id, ctx.agent_id, *ctx.policy, &shadowed);
    Json data{{"tools", tools}, {"count", tools.size()}, {"shadowed", shadowed}};
    return ToolOk(std::move(data));
  }
};

}  // namespace

std::unique_ptr<Tool> MakeReloadTools() { return std::make_unique<ReloadTools>(); }

}  // namespace tollgate
