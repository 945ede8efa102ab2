#include "execute/workspace.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/url.h"
#include "execute/tool.h"

namespace tollgate {
namespace {

constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

int Openat2(int dirfd, const char* path, int flags, int mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  how.mode = (flags & O_CREAT) ? static_cast<uint64_t>(mode) : 0;
  how.resolve = kResolve;
  return static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

bool PlainName(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

}  // namespace

Status Openat2Available() {
  static const Status status = [] {
    int fd = Openat2(AT_FDCWD, ".", O_PATH | O_DIRECTORY, 0);
    if (fd >= 0) {
      close(fd);
      return Status::Ok();
    }
    return Status::Error(errc::kSandbox,
                         std::string("this kernel lacks openat2 with RESOLVE_BENEATH (Linux >= 5.6 "
                                     "is required); file tools are disabled: ") +
                             std::strerror(errno));
  }();
  return status;
}

Status PathError(int err, const std::string& rel) {
  switch (err) {
    case ENOENT:
      return Status::Error(errc::kFileNotFound, "no such file or directory: " + rel);
    case EXDEV:
    case ELOOP:
      return Status::Error(errc::kPathForbidden,
                           "path leaves the workspace (.., absolute or symlink): " + rel);
    case EACCES:
    case EPERM:
      return Status::Error(errc::kPermission, "permission denied: " + rel);
    case ENOTDIR:
      return Status::Error(errc::kPathNotFound, "a component is not a directory: " + rel);
    case EISDIR:
      // The tool's own I/O error (write_file onto a directory: E_WRITE_ERROR).
      return Status::Error(errc::kToolExec, "is a directory: " + rel);
    case EEXIST:
      return Status::Error(errc::kInvalidArgs, "already exists: " + rel);
    case ENAMETOOLONG:
      return Status::Error(errc::kInvalidArgs, "path too long: " + rel);
    case EFBIG:
    case ENOSPC:
    case EDQUOT:
      return Status::Error(errc::kTooLarge, std::string(std::strerror(err)) + ": " + rel);
    default:
      return Status::Error(errc::kToolExec, std::string(std::strerror(err)) + ": " + rel);
  }
}

Workspace& Workspace::operator=(Workspace&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

Workspace::~Workspace() {
  if (fd_ >= 0) close(fd_);
}

Status Workspace::Open(const std::string& root, const std::string& org_id, const std::string& agent_id,
                       Workspace* out) {
  Status s = Openat2Available();
  if (!s.ok()) return s;
  if (!PlainName(org_id) || !PlainName(agent_id)) {
    return Status::Error(errc::kPathForbidden, "org_id and agent_id must be plain names for a workspace");
  }
  const std::string path = root + "/" + org_id + "/" + agent_id;
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::Error(errc::kToolExec, "cannot create workspace " + path + ": " + ec.message());
  // The workspace itself must be a real directory, not a symlink planted
  // to redirect it.
  int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return Status::Error(errc::kToolExec, "cannot open workspace " + path + ": " + std::strerror(errno));
  Workspace w;
  w.fd_ = fd;
  w.path_ = path;
  *out = std::move(w);
  return Status::Ok();
}

Status OpenBeneathFd(int dir_fd, const std::string& rel, int flags, int mode, int* fd) {
  if (rel.find('\0') != std::string::npos) return Status::Error(errc::kInvalidPath, "path holds a NUL byte");
  if (rel.size() > 4096) return Status::Error(errc::kInvalidArgs, "path too long");
  const std::string p = rel.empty() ? "." : rel;
  int f = Openat2(dir_fd, p.c_str(), flags, mode);
  if (f < 0) return PathError(errno, rel);
  *fd = f;
  return Status::Ok();
}

Status Workspace::OpenBeneath(const std::string& rel, int flags, int mode, int* fd) const {
  // The path decide matched (core/url.h NormalizePath), so "a/link/../x"
  // is a/x as decided, not wherever the link's parent is.
  const std::string norm = NormalizePath(rel);
  return OpenBeneathFd(fd_, norm.empty() ? "." : norm, flags, mode, fd);
}

Status Workspace::OpenParent(const std::string& rel, bool create_parents, int* dir_fd,
                             std::string* leaf) const {
  std::string p = NormalizePath(rel);  // as decided (see OpenBeneath)
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  std::string dir = slash == std::string::npos ? "." : p.substr(0, slash);
  if (dir.empty()) dir = "/";  // "/x": absolute, refused by openat2 below
  *leaf = slash == std::string::npos ? p : p.substr(slash + 1);
  if (!PlainName(*leaf)) return Status::Error(errc::kInvalidPath, "path must name a file: " + rel);
  if (create_parents && dir != ".") {
    // mkdir one component at a time, each beneath the last opened directory.
    int cur = -1;
    Status s = OpenBeneath(".", O_PATH | O_DIRECTORY, 0, &cur);
    if (!s.ok()) return s;
    size_t start = 0;
    while (start <= dir.size()) {
      size_t end = dir.find('/', start);
      if (end == std::string::npos) end = dir.size();
      const std::string comp = dir.substr(start, end - start);
      start = end + 1;
      if (comp.empty() || comp == ".") {
        if (end == 0) {  // leading '/': absolute
          close(cur);
          return Status::Error(errc::kPathForbidden, "path leaves the workspace (absolute): " + rel);
        }
        continue;
      }
      if (comp != ".." && mkdirat(cur, comp.c_str(), 0755) != 0 && errno != EEXIST) {
        int e = errno;
        close(cur);
        return PathError(e, rel);
      }
      int next = Openat2(cur, comp.c_str(), O_PATH | O_DIRECTORY, 0);
      int e = errno;
      close(cur);
      if (next < 0) return PathError(e, rel);
      cur = next;
    }
    close(cur);
  }
  return OpenBeneath(dir, O_PATH | O_DIRECTORY, 0, dir_fd);
}

}  // namespace tollgate
