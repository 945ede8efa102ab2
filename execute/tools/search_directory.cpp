// search_directory {name, base?, max_depth?} (the AI Orchestrator seed's):
// directories whose name is `name` or contains it (case-insensitive), under
// `base`, at most kMaxDepth levels down and kMaxResults of them: exact
// names first, then the shallowest, then by path. What the seed's
// auto-recovery calls after E_DIR_NOT_FOUND.
// - base: "" (default) the agent's workspace; a relative path inside it; an
//   absolute path inside it (its real path, as data.base shows it); or an
//   absolute path inside one of execute.search_allowed_bases. Anything else
//   is E_PATH_FORBIDDEN. Inside a base, the kernel resolves the path
//   beneath it (openat2 RESOLVE_BENEATH), so no `..` or symlink leads out.
// - The walk never follows a symlink (O_NOFOLLOW, lstat), skips hidden
//   directories (unless `name` starts with '.'), does not descend into
//   node_modules or __pycache__, and stops after kMaxVisited entries.
// data: {query, base, matches (paths relative to the workspace, or absolute
// under an allowed base), count, max_depth, truncated}.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>

#include "core/url.h"
#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

inline constexpr int kMaxDepth = 3;
inline constexpr size_t kMaxResults = 5;
inline constexpr size_t kMaxVisited = 50000;

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Found {
  bool exact;
  int depth;
  std::string path;
};

struct Dir {
  int fd;
  std::string path;  // "" = the base inside the workspace
  int depth;         // of the entries inside it
};

// Breadth-first from `root` (owned); every match, up to a generous cap.
std::vector<Found> Walk(int root, const std::string& prefix, const std::string& query, int max_depth,
                        bool* cut) {
  const std::string q = Lower(query);
  const bool hidden_ok = query[0] == '.';
  std::vector<Found> found;
  std::deque<Dir> todo{{root, prefix, 1}};
  size_t visited = 0;
  while (!todo.empty()) {
    Dir dir = todo.front();
    todo.pop_front();
    DIR* d = fdopendir(dir.fd);
    if (d == nullptr) {
      close(dir.fd);
      continue;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == ".." || (n[0] == '.' && !hidden_ok)) continue;
      if (++visited > kMaxVisited) {
        *cut = true;
        break;
      }
      struct stat st {};
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      const std::string path = dir.path.empty() ? n : dir.path + "/" + n;
      const std::string low = Lower(n);
      if (low.find(q) != std::string::npos && found.size() < 1000) {
        found.push_back({low == q, dir.depth, ToValidUtf8(path)});
      }
      if (dir.depth >= max_depth || n == "node_modules" || n == "__pycache__" || *cut) continue;
      int sub = openat(dirfd(d), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) todo.push_back({sub, path, dir.depth + 1});
    }
    closedir(d);
  }
  return found;
}

class SearchDirectory : public BuiltinTool {
 public:
  SearchDirectory() : BuiltinTool("search_directory") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    for (const auto& [k, v] : args.items()) {
      if (k != "name" && k != "base" && k != "max_depth")
        return ToolFail(errc::kInvalidArgs, "unknown argument " + k);
    }
    std::string name, base;
    if (!StringArg(args, "name", &name) || name.empty() || name.size() > 255 ||
        name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
      return ToolFail(errc::kInvalidArgs, "name (a directory name, 1-255 bytes, no '/') is required");
    }
    if (!StringArg(args, "base", &base, false)) return ToolFail(errc::kInvalidArgs, "base must be a string");
    int max_depth = kMaxDepth;
    if (args.contains("max_depth")) {
      if (!args["max_depth"].is_number_integer() || args["max_depth"].get<int64_t>() < 1) {
        return ToolFail(errc::kInvalidArgs, "max_depth must be a positive integer");
      }
      max_depth = static_cast<int>(std::min<int64_t>(kMaxDepth, args["max_depth"].get<int64_t>()));
    }
    if (Status s = CheckPathLimits(base); !s.ok()) return FailFrom(s);
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;

    // Which directory, opened how, and how its matches are named.
    std::string rel = ToolPath(base), shown, prefix;
    if (rel == ".") rel.clear();
    int fd = -1;
    Status s;
    const bool in_ws = rel.empty() || rel[0] != '/' || rel == ws.path() || rel.rfind(ws.path() + "/", 0) == 0;
    if (in_ws) {
      if (!rel.empty() && rel[0] == '/') rel = rel == ws.path() ? "" : rel.substr(ws.path().size() + 1);
      s = ws.OpenBeneath(rel.empty() ? "." : rel, O_RDONLY | O_DIRECTORY, 0, &fd);
      shown = rel.empty() ? ws.path() : ws.path() + "/" + rel;
      prefix = rel;
    } else {
      const std::string* allowed = nullptr;
      for (const auto& a : ctx.policy->search_allowed_bases) {
        if (rel == a || rel.rfind(a == "/" ? a : a + "/", 0) == 0) allowed = &a;
        if (allowed != nullptr) break;
      }
      if (allowed == nullptr) {
        return ToolFail(errc::kPathForbidden,
                        "base " + ToValidUtf8(base) +
                            " is outside the workspace and not in execute.search_allowed_bases");
      }
      const int afd = open(allowed->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (afd < 0) return FailFrom(PathError(errno, *allowed));
      const std::string below = rel == *allowed ? "." : rel.substr(*allowed == "/" ? 1 : allowed->size() + 1);
      s = OpenBeneathFd(afd, below, O_RDONLY | O_DIRECTORY, 0, &fd);
      close(afd);
      shown = prefix = rel;
    }
    if (!s.ok()) return FailFrom(s);
    bool cut = false;
    std::vector<Found> found = Walk(fd, prefix, name, max_depth, &cut);
    std::stable_sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
      return a.exact != b.exact ? a.exact : a.depth != b.depth ? a.depth < b.depth : a.path < b.path;
    });
    Json matches = Json::array();
    for (size_t i = 0; i < found.size() && i < kMaxResults; ++i) matches.push_back(found[i].path);
    return ToolOk({{"query", name},
                   {"base", ToValidUtf8(shown)},
                   {"matches", matches},
                   {"count", matches.size()},
                   {"max_depth", max_depth},
                   {"truncated", cut || found.size() > kMaxResults}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeSearchDirectory() { return std::make_unique<SearchDirectory>(); }

}  // namespace tollgate
