// file_exists {path}: {exists, type?, output ("true" | "false", Kaizen's)}.
// A path outside the workspace is E_PATH_FORBIDDEN, not "false": the agent
// learns nothing about the host.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {

const char* EntryType(mode_t m);

namespace {

class FileExists : public BuiltinTool {
 public:
  FileExists() : BuiltinTool("file_exists") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string path;
    if (!StringArg(args, "path", &path)) return ToolFail(errc::kInvalidArgs, "path (string) is required");
    if (Status p = CheckFilePath(path); !p.ok()) return FailFrom(p);
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    int fd = -1;
    Status s = ws.OpenBeneath(path, O_PATH, 0, &fd);
    // Missing, or under something that is not a directory: not there.
    if (!s.ok() && (s.code() == errc::kFileNotFound || s.code() == errc::kPathNotFound)) {
      return ToolOk({{"path", path}, {"exists", false}, {"output", "false"}});
    }
    if (!s.ok())
      return FailFrom(s.code() == errc::kToolExec ? Status::Error(errc::kReadError, s.message()) : s);
    struct stat st {};
    fstat(fd, &st);
    close(fd);
    return ToolOk({{"path", path}, {"exists", true}, {"type", EntryType(st.st_mode)}, {"output", "true"}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeFileExists() { return std::make_unique<FileExists>(); }

}  // namespace tollgate
