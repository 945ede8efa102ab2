// The seccomp filter of the sandbox (docs/sandbox.md "The seccomp filter"):
// a deny list, built once with libseccomp, that bwrap installs (`--seccomp
// FD`) after it has set the sandbox up and before it execs the program, so
// the program and everything it starts are bound by it. It refuses, with
// EPERM, what a program has no business calling and what has been the way
// out of sandboxes: new namespaces (unshare, clone with a CLONE_NEW* flag,
// setns), ptrace and process_vm_*, the kernel keyring, bpf, perf events,
// userfaultfd, io_uring, every mount call, chroot/pivot_root, modules,
// kexec, file handles, swap, reboot, acct, quotas, raw I/O ports,
// personality flags that weaken ASLR or map page zero, terminal input
// injection (TIOCSTI/TIOCLINUX) and vsock sockets. clone3 gets ENOSYS: its
// flags sit in memory the filter cannot read, and libc falls back to clone,
// whose flags it can. Syscalls of another ABI (i386/x32 on x86-64) kill the
// program: the rules are written for the native one.
#pragma once

#include "core/status.h"

namespace tollgate {

// A new fd (O_CLOEXEC, offset 0) holding the compiled BPF program, for
// bwrap's --seccomp. The caller closes it. E_SANDBOX_UNAVAILABLE when the
// filter cannot be built (then nothing may run).
Status SeccompProgramFd(int* fd);

}  // namespace tollgate
