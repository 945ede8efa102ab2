// get_datetime (the AI Orchestrator seed's): the time of the call in the
// seed's formats, from the stage's clock (ctx.now_us), so a replay gives the
// same answer. Always UTC:
//   datetime   "2026-01-28T15:30:00+00:00" (ISO 8601, seconds; Python's
//              datetime.fromisoformat reads it)
//   date       "2026-01-28"      time  "15:30:00"
//   timestamp  Unix seconds (integer)
//   timezone   "UTC"             iso   RFC 3339 with microseconds and Z
//   unix_ms    as current_time gives it
#include <ctime>

#include "core/event.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class GetDatetime : public BuiltinTool {
 public:
  GetDatetime() : BuiltinTool("get_datetime") {}
  Json Run(const Json&, const ToolContext& ctx) const override {
    int64_t secs = ctx.now_us / 1000000;
    if (ctx.now_us % 1000000 < 0) --secs;  // floor, for times before 1970
    const std::time_t t = static_cast<std::time_t>(secs);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char date[32], time[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", &tm);
    std::strftime(time, sizeof time, "%H:%M:%S", &tm);
    return ToolOk({{"datetime", std::string(date) + "T" + time + "+00:00"},
                   {"date", date},
                   {"time", time},
                   {"timestamp", secs},
                   {"timezone", "UTC"},
                   {"iso", FormatTime(ctx.now_us)},
                   {"unix_ms", ctx.now_us / 1000}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeGetDatetime() { return std::make_unique<GetDatetime>(); }

}  // namespace tollgate
