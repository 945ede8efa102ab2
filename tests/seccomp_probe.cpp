// Tries, from inside the sandbox, the calls its seccomp filter refuses (and
// a few it must allow), and prints one "<name> <result>" line each: "ok" or
// the errno's name (EPERM, ENOSYS...). Raw syscalls, so libc wrappers and
// their fallbacks do not hide what the kernel answered.
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {

void Report(const char* name, long rc) {
  std::printf("%s %s\n", name, rc >= 0 ? "ok" : strerrorname_np(errno));
}

// clone() with `flags` that returns in the child like fork; the child exits.
long Clone(unsigned long flags) {
  const long rc = syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (rc == 0) _exit(0);
  if (rc > 0) waitpid(static_cast<pid_t>(rc), nullptr, 0);
  return rc;
}

}  // namespace

int main() {
  Report("unshare-user", syscall(SYS_unshare, CLONE_NEWUSER));
  Report("unshare-mount", syscall(SYS_unshare, CLONE_NEWNS));
  Report("unshare-net", syscall(SYS_unshare, CLONE_NEWNET));
  Report("unshare-time", syscall(SYS_unshare, CLONE_NEWTIME));
  Report("unshare-files", syscall(SYS_unshare, CLONE_FILES));  // not a namespace: allowed
  Report("clone-user", Clone(CLONE_NEWUSER));
  Report("clone-pid", Clone(CLONE_NEWPID));
  Report("clone-plain", Clone(0));
  Report("clone3", syscall(SYS_clone3, nullptr, 0));
  Report("setns", syscall(SYS_setns, 0, CLONE_NEWUSER));
  Report("ptrace", syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, nullptr, nullptr));
  char buf[8] = {0}, dst[8];
  iovec local{dst, sizeof dst}, remote{buf, sizeof buf};
  Report("process_vm_readv", syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0));
  Report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
  Report("add_key", syscall(SYS_add_key, "user", "probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
  Report("bpf", syscall(SYS_bpf, 9999, nullptr, 0));
  Report("perf_event_open", syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0));
  Report("userfaultfd", syscall(SYS_userfaultfd, 1 /* UFFD_USER_MODE_ONLY */));
  Report("io_uring_setup", syscall(SYS_io_uring_setup, 1, nullptr));
  Report("mount", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, nullptr));
  Report("chroot", syscall(SYS_chroot, "/tmp"));
  Report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, nullptr, O_RDONLY));
  Report("personality-no-aslr", syscall(SYS_personality, ADDR_NO_RANDOMIZE));
  Report("personality-high-bit-no-aslr", syscall(SYS_personality, 0x80000000u | ADDR_NO_RANDOMIZE));
  Report("personality-query", syscall(SYS_personality, 0xffffffffu));
  Report("personality-linux", syscall(SYS_personality, PER_LINUX));
  char c = 'x';
  Report("tiocsti", syscall(SYS_ioctl, 0, TIOCSTI, &c));
  Report("vsock", syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0));
  Report("fork", Clone(0));
  return 0;
}
