#include "execute/seccomp_filter.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "execute/tool.h"

namespace tollgate {
namespace {

// Refused outright (EPERM). docs/sandbox.md says why each is here. Names
// this architecture lacks (iopl on arm64) are skipped.
constexpr const char* kRefused[] = {
    // Joining another namespace; another process's memory or state.
    "setns", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    // The kernel keyring is not namespaced: keys are shared with the host.
    "keyctl", "add_key", "request_key",
    // Large kernel attack surfaces no tool needs.
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    // The filesystem view bwrap built stays as built.
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr",
    // File handles open by inode, past every path (the "shocker" escape).
    "open_by_handle_at", "name_to_handle_at",
    // The machine itself: modules, kexec, swap, reboot, accounting, quotas,
    // raw I/O ports, the kernel log, obsolete calls kept for exploits.
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "swapon", "swapoff",
    "reboot", "acct", "quotactl", "quotactl_fd", "iopl", "ioperm", "syslog", "vhangup", "uselib",
    "lookup_dcookie", "nfsservctl"};

// Namespace flags of clone and unshare. CLONE_NEWTIME is unshare's only: in
// clone's first argument that bit is part of the exit signal.
constexpr unsigned long kCloneNamespaces[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWNET,   CLONE_NEWPID,
                                              CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP};

// personality() flags that switch off ASLR, make data executable or allow a
// mapping at address 0 (what a kernel NULL dereference exploit needs).
constexpr uint32_t kBadPersonality[] = {ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO,
                                        ADDR_COMPAT_LAYOUT};

struct Ctx {
  scmp_filter_ctx c = nullptr;
  ~Ctx() {
    if (c != nullptr) seccomp_release(c);
  }
};

// Adds one rule; `nr` < 0 (not on this architecture) is skipped.
int Add(scmp_filter_ctx c, uint32_t action, int nr, unsigned count = 0, scmp_arg_cmp cmp = {}) {
  if (nr < 0) return 0;
  return count == 0 ? seccomp_rule_add(c, action, nr, 0) : seccomp_rule_add(c, action, nr, 1, cmp);
}

Status Build(std::string* program) {
  Ctx ctx;
  ctx.c = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx.c == nullptr) return Status::Error(errc::kSandbox, "seccomp_init failed");
  int rc = seccomp_attr_set(ctx.c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : kRefused) rc = rc != 0 ? rc : Add(ctx.c, eperm, seccomp_syscall_resolve_name(name));
  // libc tries clone3 first and falls back to clone on ENOSYS.
  if (rc == 0) rc = Add(ctx.c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3));
  for (unsigned long flag : kCloneNamespaces) {
    // clone's flags are its first argument, except on s390 (its second).
#if defined(__s390__) || defined(__s390x__)
    const scmp_arg_cmp clone_flags = SCMP_A1(SCMP_CMP_MASKED_EQ, flag, flag);
#else
    const scmp_arg_cmp clone_flags = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
#endif
    if (rc == 0) rc = Add(ctx.c, eperm, SCMP_SYS(clone), 1, clone_flags);
    if (rc == 0) rc = Add(ctx.c, eperm, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  if (rc == 0)
    rc = Add(ctx.c, eperm, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME));
  // personality(0xffffffff) only reads the current value and must keep
  // working. A rule compares each argument once, so "flag F set and not
  // 0xffffffff" is spelled as "F set and some other bit b clear", one rule
  // per b: only 0xffffffff has F and every other bit set.
  for (uint32_t flag : kBadPersonality) {
    for (int b = 0; b < 32 && rc == 0; ++b) {
      const uint32_t bit = 1u << b;
      if (bit == flag) continue;
      rc = Add(ctx.c, eperm, SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag | bit, flag));
    }
  }
  // Typing into the terminal of whoever reads it; the kernel uses the low
  // 32 bits of the request.
  for (unsigned long req : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
    if (rc == 0) rc = Add(ctx.c, eperm, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, req));
  }
  // vsock is not confined by the network namespace: it reaches the host
  // or hypervisor.
  if (rc == 0)
    rc = Add(ctx.c, eperm, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_VSOCK));
  if (rc != 0)
    return Status::Error(errc::kSandbox,
                         std::string("cannot build the seccomp filter: ") + std::strerror(-rc));
  const int fd = memfd_create("tollgate-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return Status::Error(errc::kSandbox, std::string("memfd_create failed: ") + std::strerror(errno));
  rc = seccomp_export_bpf(ctx.c, fd);
  const off_t size = lseek(fd, 0, SEEK_END);
  program->assign(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  const bool read_back = rc == 0 && size > 0 && pread(fd, program->data(), program->size(), 0) == size;
  close(fd);
  if (!read_back) return Status::Error(errc::kSandbox, "cannot export the seccomp filter");
  return Status::Ok();
}

}  // namespace

Status SeccompProgramFd(int* fd) {
  static std::string program;
  static const Status built = Build(&program);
  if (!built.ok()) return built;
  const int f = memfd_create("tollgate-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (f < 0)
    return Status::Error(errc::kSandbox, std::string("memfd_create failed: ") + std::strerror(errno));
  // Sealed: nothing can change the program between here and bwrap.
  if (pwrite(f, program.data(), program.size(), 0) != static_cast<ssize_t>(program.size()) ||
      fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    const int e = errno;
    close(f);
    return Status::Error(errc::kSandbox, std::string("cannot stage the seccomp filter: ") + std::strerror(e));
  }
  *fd = f;
  return Status::Ok();
}

}  // namespace tollgate
