// get_system_info: what an agent may know about where it runs: OS, kernel,
// architecture, CPUs, memory, uptime, and (the AI Orchestrator seed's) the
// disk its workspace is on and the workspace itself: its path (as commands
// see it), bytes and files used. Seed names (cpu_count, memory_total_gb)
// beside tollgate's (cpus, memory_total_mb). Nothing identifying (no
// hostname, no users, no addresses). The workspace walk is bounded
// (kMaxWalkEntries, never through a symlink); past it, `truncated`.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>

#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

constexpr size_t kMaxWalkEntries = 10000;
constexpr int kMaxWalkDepth = 16;

double Gb(double bytes) { return std::round(bytes / (1 << 30) * 100) / 100; }  // 2 decimals

struct Usage {
  uint64_t bytes = 0, files = 0, dirs = 0;
  size_t seen = 0;
  bool truncated = false;
};

// Adds what `dir_fd` (owned) holds; each subdirectory opened beneath it
// without following a symlink.
void Walk(int dir_fd, int depth, Usage* u) {
  DIR* d = fdopendir(dir_fd);
  if (d == nullptr) {
    close(dir_fd);
    return;
  }
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (++u->seen > kMaxWalkEntries) {
      u->truncated = true;
      break;
    }
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      ++u->files;
      u->bytes += static_cast<uint64_t>(st.st_size);
    } else if (S_ISDIR(st.st_mode)) {
      ++u->dirs;
      if (depth + 1 >= kMaxWalkDepth) {
        u->truncated = true;
        continue;
      }
      int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) Walk(sub, depth + 1, u);
    }
  }
  closedir(d);
}

class GetSystemInfo : public BuiltinTool {
 public:
  GetSystemInfo() : BuiltinTool("get_system_info") {}
  Json Run(const Json&, const ToolContext& ctx) const override {
    utsname u{};
    uname(&u);
    struct sysinfo si {};
    sysinfo(&si);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const double total = static_cast<double>(si.totalram) * si.mem_unit;
    const double free = static_cast<double>(si.freeram) * si.mem_unit;
    Json data{{"os", u.sysname},
              {"kernel", u.release},
              {"arch", u.machine},
              {"cpus", cpus},
              {"cpu_count", cpus},
              {"memory_total_mb", static_cast<uint64_t>(si.totalram) * si.mem_unit / (1 << 20)},
              {"memory_free_mb", static_cast<uint64_t>(si.freeram) * si.mem_unit / (1 << 20)},
              {"memory_total_gb", Gb(total)},
              {"memory_free_gb", Gb(free)},
              {"uptime_s", si.uptime},
              {"executor", "tollgate"}};
    // The workspace and its disk: left out (not an error) when the
    // workspace cannot be opened; the rest still answers.
    Workspace ws;
    Json err;
    int fd = -1;
    if (OpenWorkspace(ctx, &ws, &err) && ws.OpenBeneath(".", O_RDONLY | O_DIRECTORY, 0, &fd).ok()) {
      struct statvfs vfs {};
      if (fstatvfs(fd, &vfs) == 0) {
        const double block = static_cast<double>(vfs.f_frsize);
        data["disk"] = {{"total_gb", Gb(block * static_cast<double>(vfs.f_blocks))},
                        {"free_gb", Gb(block * static_cast<double>(vfs.f_bavail))},
                        {"used_gb", Gb(block * static_cast<double>(vfs.f_blocks - vfs.f_bfree))}};
      }
      Usage usage;
      Walk(fd, 0, &usage);  // takes fd
      data["workspace"] = {{"path", ws.path()},
                           {"size_bytes", usage.bytes},
                           {"size_mb", std::round(static_cast<double>(usage.bytes) / (1 << 20) * 100) / 100},
                           {"files", usage.files},
                           {"directories", usage.dirs},
                           {"truncated", usage.truncated}};
    }
    return ToolOk(std::move(data));
  }
};

}  // namespace

std::unique_ptr<Tool> MakeGetSystemInfo() { return std::make_unique<GetSystemInfo>(); }

}  // namespace tollgate
