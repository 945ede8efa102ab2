// StageHost: runs any set of stages, in either deployment (`tollgate up`
// runs all four, `tollgate stage NAME` one). It does the stage contract's
// plumbing once (core/stage.h; docs/architecture.md "The stage contract"):
//   1. restore: each stage folds the log (Stage::Restore), in the order given;
//   2. subscribe: each stage hears every later append (Stage::OnAppended);
//   3. run: one StageRunner per stage on its own thread;
//   4. stop: every runner after its batch in flight;
// and reports each runner's counters. It knows no stage by name, no log and
// no deployment: those come in as the contract's interfaces.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/canonical_json.h"
#include "core/stage.h"
#include "runtime/stage_runner.h"

namespace tollgate {

// What the host runs the stages over; everything outlives the host.
struct HostEnv {
  const LogHistory* history = nullptr;  // read by Restore
  AppendFeed* feed = nullptr;           // where stages subscribe
  EventSink* sink = nullptr;            // where runners append
  const LogView* view = nullptr;        // what runners give Process
  // Each stage's runner options (group, transactional id, bus, ...).
  std::function<RunnerOptions(const Stage&)> runner_options;
};

class StageHost {
 public:
  // Steps 1-2 for `stages`, in order: the stages' state is current and
  // stays so, and nothing runs yet (a deployment registers its other
  // subscribers, then calls Run). On error the stages already subscribed
  // stay subscribed: they live as long as the host.
  static Status Restore(std::vector<std::unique_ptr<Stage>> stages, HostEnv env,
                        std::unique_ptr<StageHost>* out);
  // Step 3. On error no runner runs.
  Status Run();
  // Stops and joins every runner.
  ~StageHost();
  void Stop();

  const std::vector<std::unique_ptr<Stage>>& stages() const { return stages_; }
  // Each runner, by its stage's name (/metrics).
  std::vector<std::pair<std::string, const StageRunner*>> runners() const;
  // Sum of every runner's retries (failed batches).
  uint64_t retries() const;
  // Each runner's counters, by stage name.
  Json stats() const;

 private:
  StageHost() = default;
  HostEnv env_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<std::unique_ptr<StageRunner>> runners_;  // one per stage, same order
  std::vector<std::thread> threads_;
};

}  // namespace tollgate
