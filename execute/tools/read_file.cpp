// read_file {path}: the file's content (UTF-8 text, else base64), capped at
// execute.max_read_bytes (E_TOO_LARGE beyond). Read-only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class ReadFile : public BuiltinTool {
 public:
  ReadFile() : BuiltinTool("read_file") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string path;
    if (!StringArg(args, "path", &path)) return ToolFail(errc::kInvalidArgs, "path (string) is required");
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    int fd = -1;
    Status s = ws.OpenBeneath(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, &fd);
    if (!s.ok()) return FailFrom(s);
    struct stat st{};
    fstat(fd, &st);
    if (!S_ISREG(st.st_mode)) {
      close(fd);
      return ToolFail(errc::kInvalidArgs, "not a regular file: " + path);
    }
    const size_t cap = ctx.policy->max_read_bytes;
    if (static_cast<size_t>(st.st_size) > cap) {
      close(fd);
      return ToolFail(errc::kTooLarge, path + " is " + std::to_string(st.st_size) + " bytes; the limit is " +
                                           std::to_string(cap));
    }
    std::string content;
    s = ReadCapped(fd, cap, &content);
    close(fd);
    if (!s.ok()) return FailFrom(s);
    if (content.size() > cap) return ToolFail(errc::kTooLarge, path + " grew past the limit while read");
    const bool text = IsValidUtf8(content);
    return ToolOk({{"path", path},
                   {"size", content.size()},
                   {"encoding", text ? "utf-8" : "base64"},
                   {"content", text ? content : Base64Encode(content)}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeReadFile() { return std::make_unique<ReadFile>(); }

}  // namespace tollgate
