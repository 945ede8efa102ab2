// echo: returns its args. current_time: the time of the call (the stage's
// clock, so a replay gives the same answer).
#include "core/event.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class Echo : public BuiltinTool {
 public:
  Echo() : BuiltinTool("echo") {}
  Json Run(const Json& args, const ToolContext&) const override { return ToolOk(args); }
};

class CurrentTime : public BuiltinTool {
 public:
  CurrentTime() : BuiltinTool("current_time") {}
  Json Run(const Json&, const ToolContext& ctx) const override {
    return ToolOk({{"utc", FormatTime(ctx.now_us)}, {"unix_ms", ctx.now_us / 1000}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeEcho() { return std::make_unique<Echo>(); }
std::unique_ptr<Tool> MakeCurrentTime() { return std::make_unique<CurrentTime>(); }

}  // namespace tollgate
