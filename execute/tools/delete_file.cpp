// delete_file {path}: removes a file (or an empty directory) in the
// workspace. A symlink is removed itself, never its target. Mutating. A
// missing file is E_FILE_NOT_FOUND (E_DIR_NOT_FOUND for a missing directory
// on the way) with suggestions (path_recovery.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "execute/tools/file_common.h"
#include "execute/tools/path_recovery.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class DeleteFile : public BuiltinTool {
 public:
  DeleteFile() : BuiltinTool("delete_file") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    if (!ctx.policy->writes_enabled) return ToolFail(errc::kWritesDisabled, "writes are disabled by policy");
    std::string path;
    if (!StringArg(args, "path", &path)) return ToolFail(errc::kInvalidArgs, "path (string) is required");
    if (Status p = CheckFilePath(path); !p.ok()) return FailFrom(p);
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    int dir = -1;
    std::string leaf;
    Status s = ws.OpenParent(path, false, &dir, &leaf);
    if (!s.ok()) return FailPath(ws, path, s, false, errc::kWriteError);
    struct stat st {};
    if (fstatat(dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      int e = errno;
      close(dir);
      return FailPath(ws, path, PathError(e, path), false, errc::kWriteError);
    }
    int rc = unlinkat(dir, leaf.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
    int e = errno;
    close(dir);
    if (rc != 0) {
      if (e == ENOTEMPTY) return ToolFail(errc::kInvalidArgs, "directory not empty: " + path);
      return FailPath(ws, path, PathError(e, path), false, errc::kWriteError);
    }
    return ToolOk({{"path", path}, {"deleted", true}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeDeleteFile() { return std::make_unique<DeleteFile>(); }

}  // namespace tollgate
