// write_file {path, content, append?, encoding? ("utf-8"|"base64"),
// create_dirs? (default true)}: writes (or appends to) a file in the
// workspace; answers bytes_written and appended, and the AI Orchestrator
// seed's size (the bytes written) and mode ("write" | "append"). Mutating;
// refused with E_WRITE_DISABLED (alias E_WRITES_DISABLED) when writes are off.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "execute/tools/file_common.h"
#include "execute/tools/path_recovery.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class WriteFile : public BuiltinTool {
 public:
  WriteFile() : BuiltinTool("write_file") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    if (!ctx.policy->writes_enabled) return ToolFail(errc::kWritesDisabled, "writes are disabled by policy");
    std::string path, content, encoding = "utf-8";
    if (!StringArg(args, "path", &path)) return ToolFail(errc::kInvalidArgs, "path (string) is required");
    if (!StringArg(args, "content", &content))
      return ToolFail(errc::kInvalidArgs, "content (string) is required");
    if (Status p = CheckFilePath(path); !p.ok()) return FailFrom(p);
    if (!StringArg(args, "encoding", &encoding, false) || (encoding != "utf-8" && encoding != "base64")) {
      return ToolFail(errc::kInvalidArgs, "encoding must be utf-8 or base64");
    }
    if (encoding == "base64") {
      std::string decoded;
      if (!Base64Decode(content, &decoded))
        return ToolFail(errc::kInvalidArgs, "content is not valid base64");
      content = std::move(decoded);
    }
    // Checked before any directory is created.
    if (Status lim = CheckPathLimits(path); !lim.ok()) return FailFrom(lim);
    path = ToolPath(path);
    const bool append = args.value("append", false) == true;
    const bool create_dirs = !(args.contains("create_dirs") && args["create_dirs"] == false);
    if (content.size() > ctx.policy->max_write_bytes) {
      return ToolFail(errc::kTooLarge, "content is " + std::to_string(content.size()) +
                                           " bytes; the limit is " +
                                           std::to_string(ctx.policy->max_write_bytes));
    }
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    int dir = -1;
    std::string leaf;
    Status s = ws.OpenParent(path, create_dirs, &dir, &leaf);
    if (!s.ok()) return FailPath(ws, path, s, false, errc::kWriteError);
    // The leaf is resolved beneath its directory too: a symlink named like
    // the file cannot lead out.
    int fd = -1;
    const int flags = O_WRONLY | O_CREAT | O_NOCTTY | O_NONBLOCK | (append ? O_APPEND : O_TRUNC);
    s = OpenBeneathFd(dir, leaf, flags, 0644, &fd);
    close(dir);
    if (!s.ok()) return FailPath(ws, path, s, false, errc::kWriteError);
    if (append) {
      struct stat st {};
      fstat(fd, &st);
      if (static_cast<size_t>(st.st_size) + content.size() > ctx.policy->max_write_bytes * 16) {
        close(fd);
        return ToolFail(errc::kTooLarge,
                        "appending would make " + path + " larger than 16 x max_write_bytes");
      }
    }
    size_t done = 0;
    while (done < content.size()) {
      ssize_t n = write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        close(fd);
        return FailPath(ws, path, PathError(e, path), false, errc::kWriteError);
      }
      done += static_cast<size_t>(n);
    }
    close(fd);
    return ToolOk({{"path", path},
                   {"size", done},
                   {"mode", append ? "append" : "write"},
                   {"bytes_written", done},
                   {"appended", append}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeWriteFile() { return std::make_unique<WriteFile>(); }

}  // namespace tollgate
