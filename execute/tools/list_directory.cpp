// list_directory {path?}: the entries of a workspace directory (name, type,
// size), sorted, capped at execute.max_list_entries (truncated: true).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "execute/tools/file_common.h"
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
    if (!s.ok()) return FailFrom(s);
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      close(fd);
      return ToolFail(errc::kToolExec, "cannot read directory " + path);
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
      struct stat st{};
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      Json entry{{"name", ToValidUtf8(n)}, {"type", EntryType(st.st_mode)}};
      if (S_ISREG(st.st_mode)) entry["size"] = st.st_size;
      entries.push_back(std::move(entry));
    }
    closedir(d);
    std::sort(entries.begin(), entries.end(),
              [](const Json& a, const Json& b) { return a["name"].get<std::string>() < b["name"].get<std::string>(); });
    return ToolOk({{"path", path}, {"entries", entries}, {"truncated", truncated}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeListDirectory() { return std::make_unique<ListDirectory>(); }

}  // namespace tollgate
