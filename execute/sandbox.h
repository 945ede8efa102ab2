// RunSandboxed: runs one program, never through a shell, contained:
// - its own process group; on timeout, and always once it has exited, the
//   whole group is SIGKILLed before the leader is reaped, so nothing it
//   started outlives it (a descendant that calls setsid() leaves the group;
//   RLIMIT_NPROC bounds how many it can make, and PR_SET_PDEATHSIG kills the
//   direct child if tollgate dies);
// - rlimits on CPU, address space, file size, open files and processes;
// - as root, run as `run_as` (default nobody) with no supplementary groups,
//   so RLIMIT_NPROC means something (it counts per real uid and root is
//   exempt) and it cannot write what it does not own; no_new_privs set;
// - a scrubbed environment (only what the caller passes), stdin from the
//   caller's bytes, stdout/stderr captured up to max_output_bytes each.
// Thread-safe: may run from several worker threads at once.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "execute/config.h"

namespace tollgate {

struct ProcessSpec {
  std::string path;               // absolute path of the program
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value", the whole environment
  int cwd_fd = -1;                // working directory (fchdir), -1: unchanged
  std::string stdin_data;
  SandboxLimits limits;
  std::string run_as;             // user to become when root; "" = stay
  // When set, the child's process group is recorded in run_dir/<pgid> while
  // it runs, so that KillLeftovers() can end it after tollgate itself was
  // killed (kill -9 gives no chance to clean up).
  std::string run_dir;
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
// be started; a program that fails or times out is a ProcessResult.
Status RunSandboxed(const ProcessSpec& spec, ProcessResult* result);

// Kills what is left of the process groups recorded in `run_dir` (a
// previous tollgate died while they ran) and clears the records. Only
// processes of a recorded group that started no earlier than its leader are
// killed, so a recycled group id is left alone. Returns how many it killed.
int KillLeftovers(const std::string& run_dir);

// The directories programs are looked up in (never the caller's PATH).
inline constexpr const char* kSafePath = "/usr/local/bin:/usr/bin:/bin";
// `name` looked up in kSafePath ("" when absent); an absolute path is
// returned as is when it is an executable file.
std::string FindProgram(const std::string& name);

}  // namespace tollgate
