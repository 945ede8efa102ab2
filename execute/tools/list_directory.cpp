// list_directory {path?}: the entries of a workspace directory (name, type,
// the AI Orchestrator seed's is_dir, size for files), sorted, capped at
// execute.max_list_entries (truncated: true), with their `count` and
// Kaizen's `output` (the names). A missing directory is E_DIR_NOT_FOUND
// with suggestions (path_recovery.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "execute/tools/file_common.h"
#include "execute/tools/path_recovery.h"
#include "execute/tools/tools.h"

namespace tollgate {

const char* EntryType(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "directory";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

namespace {

class ListDirectory : public BuiltinTool {
 public:
  ListDirectory() : BuiltinTool("list_directory") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string path = ".";
    if (!StringArg(args, "path", &path, false)) return ToolFail(errc::kInvalidArgs, "path must be a string");
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    int fd = -1;
    Status s = ws.OpenBeneath(path, O_RDONLY | O_DIRECTORY, 0, &fd);
    if (!s.ok()) return FailPath(ws, path, s, true, errc::kListError);
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      close(fd);
      return ToolFail(errc::kListError, "cannot read directory " + path);
    }
    Json entries = Json::array();
    bool truncated = false;
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      if (entries.size() >= ctx.policy->max_list_entries) {
        truncated = true;
        break;
      }
      struct stat st {};
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      Json entry{{"name", ToValidUtf8(n)}, {"type", EntryType(st.st_mode)}, {"is_dir", S_ISDIR(st.st_mode)}};
      if (S_ISREG(st.st_mode)) entry["size"] = st.st_size;
      entries.push_back(std::move(entry));
    }
    closedir(d);
    std::sort(entries.begin(), entries.end(), [](const Json& a, const Json& b) {
      return a["name"].get<std::string>() < b["name"].get<std::string>();
    });
    Json names = Json::array();
    for (const auto& e : entries) names.push_back(e["name"]);
    const size_t count = entries.size();
    return ToolOk({{"path", path},
                   {"entries", std::move(entries)},
                   {"count", count},
                   {"output", std::move(names)},
                   {"truncated", truncated}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeListDirectory() { return std::make_unique<ListDirectory>(); }

}  // namespace tollgate
