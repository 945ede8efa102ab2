// read_file {path}: the file's content (UTF-8 text, else base64), capped at
// execute.max_read_bytes (E_TOO_LARGE beyond), with `size` (bytes) and
// `lines` (the AI Orchestrator seed's), and `output` (Kaizen's name for the
// content). A missing file or directory is a recoverable not-found error
// with suggestions (path_recovery.h). Read-only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "execute/tools/file_common.h"
#include "execute/tools/path_recovery.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

class ReadFile : public BuiltinTool {
 public:
  ReadFile() : BuiltinTool("read_file") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string path;
    if (!StringArg(args, "path", &path)) return ToolFail(errc::kInvalidArgs, "path (string) is required");
    if (Status p = CheckFilePath(path); !p.ok()) return FailFrom(p);
    Workspace ws;
    Json err;
    if (!OpenWorkspace(ctx, &ws, &err)) return err;
    int fd = -1;
    Status s = ws.OpenBeneath(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, &fd);
    if (!s.ok()) return FailPath(ws, path, s, false, errc::kReadError);
    struct stat st {};
    fstat(fd, &st);
    if (!S_ISREG(st.st_mode)) {
      close(fd);
      // The seed's E_READ_ERROR; tollgate's first answer was E_INVALID_ARGS.
      return ToolResultErrorAs(errc::kReadError, errc::kInvalidArgs, "not a regular file: " + path, false);
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
    if (!s.ok()) return FailPath(ws, path, s, false, errc::kReadError);
    if (content.size() > cap) return ToolFail(errc::kTooLarge, path + " grew past the limit while read");
    const bool text = IsValidUtf8(content);
    // Lines as Python's splitlines() counts them for \n text: a last line
    // without its newline counts too.
    size_t lines = static_cast<size_t>(std::count(content.begin(), content.end(), '\n'));
    if (!content.empty() && content.back() != '\n') ++lines;
    const size_t size = content.size();
    std::string shown = text ? std::move(content) : Base64Encode(content);
    return ToolOk({{"path", path},
                   {"size", size},
                   {"lines", lines},
                   {"encoding", text ? "utf-8" : "base64"},
                   {"output", shown},
                   {"content", shown}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeReadFile() { return std::make_unique<ReadFile>(); }

}  // namespace tollgate
