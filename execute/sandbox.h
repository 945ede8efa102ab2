// RunSandboxed: runs one program, never through a shell, contained
// (docs/sandbox.md has the whole picture):
// - under bubblewrap (bwrap): new user, PID, network, IPC, UTS and mount
//   namespaces; it sees a read-only system (/usr, a few /etc files), a
//   private /tmp, a minimal /dev and /proc, `workspace` read-write at its own
//   path (the only writable place, and the cwd) and `read_only` paths; nothing
//   else of the host or the data directory. No network at all. bwrap missing
//   or unable to build the sandbox: E_SANDBOX_UNAVAILABLE, never unconfined;
// - killing the sandbox's PID 1 kills every process in it, setsid() or not:
//   on timeout, once the program has exited, and (PR_SET_PDEATHSIG on bwrap,
//   --die-with-parent inside) when tollgate itself dies, even by kill -9;
// - rlimits on CPU, address space, file size, open files and processes;
// - a seccomp filter (execute/seccomp_filter.h) refuses new namespaces,
//   ptrace, the keyring, bpf, mounts and the like inside;
// - as root, bwrap itself runs under a uid of the workspace's own
//   (SandboxUid, recorded, never shared) with `run_as`'s group (default
//   nobody's) and no supplementary groups, so RLIMIT_NPROC means something
//   (it counts per real uid and root is exempt) and one agent's fork bomb
//   cannot use up another's processes; no_new_privs set. The workspace
//   directory is given to that uid so the program can create files in it;
// - a scrubbed environment (only what the caller passes), stdin from the
//   caller's bytes, stdout/stderr captured up to max_output_bytes each.
// Thread-safe: may run from several worker threads at once. The parent-death
// signal follows the forking thread, so call it from a thread that outlives
// the call (the stage threads do).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"
#include "execute/config.h"

namespace tollgate {

struct ProcessSpec {
  std::string path;                    // absolute path of the program
  std::vector<std::string> argv;       // argv[0] included
  std::vector<std::string> env;        // "NAME=value", the whole environment
  int cwd_fd = -1;                     // the workspace directory (an O_PATH fd is enough)
  std::string workspace;               // cwd_fd's host path: bound read-write there; required
  std::vector<std::string> read_only;  // more host paths visible read-only at the same path
  std::string stdin_data;
  SandboxLimits limits;
  std::string run_as;  // user to become when root; "" = stay
  // When set, the child's process group is recorded in run_dir/<pgid> while
  // it runs, so that KillLeftovers() can end it after tollgate itself was
  // killed (kill -9 gives no chance to clean up).
  std::string run_dir;
  // The host's network inside the sandbox (bwrap --share-net); off for
  // every tool. Only an upstream MCP server declared with `network: true`.
  bool share_net = false;
  // StartSandboxed only: when >= 0, a terminal (a pty's slave end) that
  // becomes the program's stdin, stdout and stderr instead of pipes (the
  // child's in/out/err are then -1). bwrap's --new-session still detaches
  // it as the controlling terminal: it is the program's stdio, not a ctty.
  int terminal = -1;
};

struct ProcessResult {
  int exit_code = -1;      // when exited normally
  int signal = 0;          // when killed by a signal
  bool timed_out = false;  // killed at limits.timeout_ms
  std::string out, err;
  bool out_truncated = false, err_truncated = false;
  double duration_ms = 0;
};

// Fails (E_TOOL_EXEC / E_SANDBOX_UNAVAILABLE) only when the program could not
// be started; a program that fails or times out is a ProcessResult (killed
// by a signal: `signal`, as bwrap reports it, 128 + signal).
Status RunSandboxed(const ProcessSpec& spec, ProcessResult* result);

// A sandboxed program that keeps running (an upstream MCP server): started
// as RunSandboxed starts one, with the parent's ends of its pipes
// (non-blocking) handed to the caller, who talks to it and ends it with
// StopSandboxed. limits.timeout_ms is not enforced here. The parent-death
// signal follows the forking thread: start it from the thread that
// supervises it.
struct SandboxedChild {
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;  // its stdin, stdout, stderr
  int status = -1;                  // bwrap's --json-status-fd
  std::string record;               // its run_dir record, if any
  std::chrono::steady_clock::time_point started;
};
Status StartSandboxed(const ProcessSpec& spec, SandboxedChild* child);
// Kills the sandbox's process group, reaps it, removes its record and
// closes every pipe; returns the wait status. Safe on a stopped child.
int StopSandboxed(SandboxedChild* child);

// Kills what is left of the process groups recorded in `run_dir` (a
// previous tollgate died while they ran) and clears the records. Only
// processes of a recorded group that started no earlier than its leader are
// killed, so a recycled group id is left alone. Returns how many it killed.
int KillLeftovers(const std::string& run_dir);

// The bubblewrap binary RunSandboxed uses (default /usr/bin/bwrap). Tests
// point it at a missing file to see the call fail closed.
void SetSandboxProgram(const std::string& path);
std::string SandboxProgram();

// The uid a program of `workspace` runs under as root: one per workspace
// (per org and agent; per MCP server), in [kSandboxUidBase,
// +kSandboxUidRange), unnamed and owning nothing outside workspaces. Recorded
// in the uid table kSandboxUidTable (UidTable): no two workspaces ever share
// one, a workspace keeps its uid across restarts, and every process on the
// machine (several execute processes, test suites) agrees.
// E_SANDBOX_UNAVAILABLE when the table cannot be used or is full.
inline constexpr uid_t kSandboxUidBase = 1'000'000;
inline constexpr uid_t kSandboxUidRange = 1'000'000;
Status SandboxUid(const std::string& workspace, uid_t* uid);
// One table per machine, as uids and their process limits are: not one per
// workspace root (MCP servers' directories are another root, and two
// deployments on one host share the uids).
inline constexpr const char* kSandboxUidTable = "/var/lib/tollgate/sandbox-uids";

// The directories programs are looked up in (never the caller's PATH).
inline constexpr const char* kSafePath = "/usr/local/bin:/usr/bin:/bin";
// `name` looked up in kSafePath ("" when absent); an absolute path is
// returned as is when it is an executable file.
std::string FindProgram(const std::string& name);

}  // namespace tollgate
