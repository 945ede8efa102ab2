// search_files {pattern, path?, max_results?}: workspace paths (relative to
// `path`) matching a glob (fnmatch; `*` also crosses `/`, so "*.txt" finds
// them at any depth), with `count`, `pattern` and `path`. At most 100
// matches unless max_results says otherwise (the AI Orchestrator seed's
// default), never more than execute.max_search_results. Never follows
// symlinks; capped in results and depth. A missing directory is
// E_DIR_NOT_FOUND with suggestions (path_recovery.h).
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "execute/tools/file_common.h"
#include "execute/tools/path_recovery.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

struct Walk {
  std::string pattern;
  size_t max_results;
  int max_depth;
  size_t visited = 0;
  bool truncated = false;
  std::vector<std::string> found;
};

void WalkDir(int dir_fd, const std::string& prefix, int depth, Walk* w) {
  DIR* d = fdopendir(dir_fd);
  if (d == nullptr) {
    close(dir_fd);
    return;
  }
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (++w->visited > 100000 || w->found.size() >= w->max_results) {
      w->truncated = true;
      break;
    }
    const std::string rel = prefix.empty() ? n : prefix + "/" + n;
    if (fnmatch(w->pattern.c_str(), rel.c_str(), 0) == 0 || fnmatch(w->pattern.c_str(), n.c_str(), 0) == 0) {
      w->found.push_back(ToValidUtf8(rel));
    }
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (depth + 1 >= w->max_depth) {
      w->truncated = true;
      continue;
    }
    int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) WalkDir(sub, rel, depth + 1, w);
  }
  closedir(d);
}

constexpr size_t kDefaultMaxResults = 100;

class SearchFiles : public BuiltinTool {
 public:
  SearchFiles() : BuiltinTool("search_files") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string pattern, path = ".";
    if (!StringArg(args, "pattern", &pattern) || pattern.empty() || pattern.size() > 1024) {
      return ToolFail(errc::kInvalidArgs, "pattern (non-empty string) is required");
    }
    if (!StringArg(args, "path", &path, false)) return ToolFail(errc::kInvalidArgs, "path must be a string");
    Walk w;
    w.pattern = pattern;
    w.max_results = std::min(kDefaultMaxResults, ctx.policy->max_search_results);
    if (args.contains("max_results")) {
      if (!args["max_results"].is_number_integer() || args["max_results"].get<int64_t>() < 1) {
        return ToolFail(errc::kInvalidArgs, "max_results must be a positive integer");
      }
      w.max_results = std::min<size_t>(ctx.policy->max_search_results, args["max_results"].get<int64_t>());
    }
    w.max_depth = ctx.policy->max_search_depth;
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    int fd = -1;
    Status s = ws.OpenBeneath(path, O_RDONLY | O_DIRECTORY, 0, &fd);
    if (!s.ok()) return FailPath(ws, path, s, true, errc::kSearchError);
    WalkDir(fd, "", 0, &w);
    std::sort(w.found.begin(), w.found.end());
    const size_t count = w.found.size();
    return ToolOk({{"path", path},
                   {"pattern", pattern},
                   {"matches", std::move(w.found)},
                   {"count", count},
                   {"truncated", w.truncated}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeSearchFiles() { return std::make_unique<SearchFiles>(); }

}  // namespace tollgate
