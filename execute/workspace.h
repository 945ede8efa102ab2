// Workspace: an agent's directory, <root>/<org_id>/<agent_id> (created on
// demand), and the only way file tools reach the filesystem. Every path is
// resolved by the kernel with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
// against the workspace's directory fd, so `..`, absolute paths and symlinks
// that lead outside all fail (E_PATH_FORBIDDEN), with no check-then-use race.
// A kernel without openat2 (Linux < 5.6) fails closed (E_SANDBOX_UNAVAILABLE).
// A Workspace owns its fd; it is not shared between threads.
#pragma once

#include <string>

#include "core/status.h"

namespace tollgate {

// Whether this kernel has openat2 with RESOLVE_BENEATH (checked once).
Status Openat2Available();

class Workspace {
 public:
  // Opens (creating with mode 0755) <root>/<org_id>/<agent_id>. The ids must
  // be plain names (no '/', not "." or ".."; the envelope's schema already
  // limits them).
  static Status Open(const std::string& root, const std::string& org_id, const std::string& agent_id,
                     Workspace* out);
  Workspace() = default;
  Workspace(Workspace&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  Workspace& operator=(Workspace&& o) noexcept;
  ~Workspace();

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

  // openat2 beneath the workspace. `rel` is the agent's path ("" and "." are
  // the workspace itself). On success *fd is owned by the caller.
  Status OpenBeneath(const std::string& rel, int flags, int mode, int* fd) const;
  // Opens the parent directory of `rel` (creating missing directories when
  // `create_parents`) and gives the last component; for create/unlink.
  Status OpenParent(const std::string& rel, bool create_parents, int* dir_fd, std::string* leaf) const;

 private:
  int fd_ = -1;
  std::string path_;
};

// openat2(dir_fd, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS).
Status OpenBeneathFd(int dir_fd, const std::string& rel, int flags, int mode, int* fd);

// Maps an errno from a resolution to a tool error code and message.
Status PathError(int err, const std::string& rel);

}  // namespace tollgate
