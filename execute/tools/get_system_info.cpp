// get_system_info: what an agent may know about where it runs: OS, kernel,
// architecture, CPUs, memory, uptime. Nothing identifying (no hostname, no
// users, no addresses).
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class GetSystemInfo : public BuiltinTool {
 public:
  GetSystemInfo() : BuiltinTool("get_system_info") {}
  Json Run(const Json&, const ToolContext&) const override {
    utsname u{};
    uname(&u);
    struct sysinfo si{};
    sysinfo(&si);
    return ToolOk({{"os", u.sysname},
                   {"kernel", u.release},
                   {"arch", u.machine},
                   {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
                   {"memory_total_mb", static_cast<uint64_t>(si.totalram) * si.mem_unit / (1 << 20)},
                   {"memory_free_mb", static_cast<uint64_t>(si.freeram) * si.mem_unit / (1 << 20)},
                   {"uptime_s", si.uptime},
                   {"executor", "tollgate"}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeGetSystemInfo() { return std::make_unique<GetSystemInfo>(); }

}  // namespace tollgate
