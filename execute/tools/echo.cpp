// echo: returns its args. current_time: the time of the call (the stage's
// clock, so a replay gives the same answer).
#include "core/event.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class Echo : public Tool {
 public:
  std::string name() const override { return "echo"; }
  std::string description() const override { return "Return the args unchanged."; }
  bool ReadOnly(const Json&, const Json&) const override { return true; }
  Json Run(const Json& args, const ToolContext&) const override { return ToolOk(args); }
};

class CurrentTime : public Tool {
 public:
  std::string name() const override { return "current_time"; }
  std::string description() const override { return "The current UTC time."; }
  bool ReadOnly(const Json&, const Json&) const override { return true; }
  Json Run(const Json&, const ToolContext& ctx) const override {
    return ToolOk({{"utc", FormatTime(ctx.now_us)}, {"unix_ms", ctx.now_us / 1000}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeEcho() { return std::make_unique<Echo>(); }
std::unique_ptr<Tool> MakeCurrentTime() { return std::make_unique<CurrentTime>(); }

}  // namespace tollgate
