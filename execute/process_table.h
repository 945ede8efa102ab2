// ProcessTable: background_process's long-running programs (docs/tools.md,
// "background_process"), kept by the execute process.
//
// - Each program runs as execute_command's do (StartSandboxed: bubblewrap,
//   the agent's workspace, run_as's per-agent uid, no network) with a pty as
//   its stdin, stdout and stderr. One monitor thread forks them all (the
//   parent-death signal follows the forking thread, so a program never
//   outlives the table's thread, or tollgate), reads every terminal into a
//   ring of `output_bytes` (older bytes dropped and counted), reaps exits,
//   kills a program past its lifetime, and escalates a kill to SIGKILL
//   after kKillGraceMs.
// - Keyed by (org, agent, process_id): every call names its owner and sees
//   only that owner's processes. At most `max_per_agent` running per owner;
//   as many ended ones are kept (oldest forgotten first).
// - Destroying the table SIGKILLs every sandbox and reaps it.
// Thread-safe. Failures are Status codes of docs/errors.md: E_NOT_FOUND
// (no such process of this owner), E_LIMIT_EXCEEDED, E_PROCESS_EXITED (input
// or a watch for a program that ended), E_INVALID_ARGS, E_TIMEOUT (input the
// program does not read), and StartSandboxed's own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/canonical_json.h"
#include "core/status.h"
#include "execute/config.h"
#include "execute/sandbox.h"

namespace tollgate {

inline constexpr int kKillGraceMs = 5000;
inline constexpr size_t kMaxLogBytes = 64 << 10;  // one log or capture answer
inline constexpr size_t kMaxWatchPattern = 256;   // characters of a watch regex
inline constexpr size_t kMaxWatchLine = 1024;     // bytes of a line a watch sees

struct ProcessOwner {
  std::string org, agent;
  auto operator<=>(const ProcessOwner&) const = default;
};

class ProcessTable {
 public:
  ProcessTable();
  ~ProcessTable();
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;

  // Starts `spec` (its terminal is the table's) as `id`; *info is the
  // process's Info. An id already known gives its Info, starting nothing.
  Status Spawn(const ProcessOwner& owner, const std::string& id, const std::string& command, ProcessSpec spec,
               const ExecutePolicy::BackgroundLimits& limits, Json* info);
  // Whether `id` was spawned by this table (running, ended or forgotten).
  bool Knows(const ProcessOwner& owner, const std::string& id) const;
  // {process_id, command, status running|exited|killed, exit_code, signal?,
  // started_at, ended_at, reason?, output_bytes, dropped_bytes, watch?}.
  Json List(const ProcessOwner& owner) const;
  Status Info(const ProcessOwner& owner, const std::string& id, Json* info) const;
  // The raw output (as valid UTF-8): from byte `offset` of the stream (at
  // most kMaxLogBytes; earlier than what is kept starts at the oldest kept
  // byte), or else the last `lines` lines (default 100, within the last
  // kMaxLogBytes).
  Status Log(const ProcessOwner& owner, const std::string& id, int64_t offset, int64_t lines,
             Json* out) const;
  // What the terminal shows: the last `lines` lines with escape sequences
  // applied or dropped (\r, backspace, erase-line and clear-screen applied;
  // colours, cursor moves and titles dropped).
  Status Capture(const ProcessOwner& owner, const std::string& id, int64_t lines, Json* out) const;
  // Writes `bytes` to the terminal, waiting up to 2 s for the program to
  // take them (E_TIMEOUT with what was written). As a terminal does, an
  // interrupt, quit or suspend character (C-c, C-\, C-z) with ISIG set also
  // signals the program (bwrap's --new-session leaves it no controlling
  // terminal to do it).
  Status Write(const ProcessOwner& owner, const std::string& id, const std::string& bytes, Json* out);
  // Sends `sig` to the program's processes, then SIGKILL to its sandbox
  // after kKillGraceMs if it still runs; waits for it to end. An ended
  // process is answered as it is.
  Status Kill(const ProcessOwner& owner, const std::string& id, int sig, Json* info);
  // A regex (ECMAScript, polynomial-time matching, no backreferences)
  // matched against each new output line; the first match is kept (line,
  // time) and reported by Info. Replaces an earlier watch.
  Status Watch(const ProcessOwner& owner, const std::string& id, const std::string& pattern, Json* info);
  Status Unwatch(const ProcessOwner& owner, const std::string& id, Json* info);

  struct Proc;  // process_table.cpp

 private:
  struct SpawnRequest;
  std::shared_ptr<Proc> Find(const ProcessOwner& owner, const std::string& id) const;  // mu_ held
  void Monitor();
  void StartOne(SpawnRequest* r);
  void Wake();

  mutable std::mutex mu_;
  std::condition_variable ended_;  // a process ended
  std::map<ProcessOwner, std::vector<std::shared_ptr<Proc>>> procs_;
  std::set<std::pair<ProcessOwner, std::string>> known_;
  std::deque<SpawnRequest*> spawns_;
  bool stop_ = false;
  int wake_[2] = {-1, -1};
  std::thread monitor_;
};

}  // namespace tollgate
