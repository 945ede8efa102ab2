// Recorded-result replay: a stage that takes execute's place in the
// pipeline (`tollgate up --replay-from ...`) and answers each call decide
// let through with the result a past run recorded, running nothing, so an
// agent can be re-run against yesterday's tool results to reproduce a bug.
//
// Matching: a call of (session, tool, args hash) gets the next recorded
// result of the same key, in the order the recording received them (the
// n-th call of a key gets the n-th result). With `map_to_session` set,
// every session of the re-run is matched against that recorded session
// (each re-run session on its own: two agents re-running session S both
// get S's results). A call with no recorded result left is a mismatch: it
// is not executed, its result fails with E_REPLAY_MISMATCH, and the log
// records the mismatch as its execution.completed (executor "replay",
// data.replay.matched false), like any other outcome.
//
// What the log gets for a served call: execution.completed with the
// recorded result, cost_usd 0 (nothing ran), executor "replay" and
// data.replay = {matched, key, index, from_request_id, from_seq}. No
// execution.started: nothing is started. The result's meta carries
// "replayed": {from_request_id, from_seq}.
//
// Deterministic given the order of its input, like execute: a message read
// again after a crash re-emits what was recorded; a re-sent copy of a
// finished request is ignored; a batch retried after a failed append gets
// the same indexes (assigned per request id).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "audit/log_store.h"
#include "core/flow_stage.h"
#include "replay/recording.h"

namespace tollgate::replay {

struct ReplayStageConfig {
  Topics topics;
  std::shared_ptr<const Recording> recording;
  std::string map_to_session;  // "" = match each session to its own recording
};

class ReplayExecuteStage : public Stage {
 public:
  explicit ReplayExecuteStage(ReplayStageConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "replay"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.execute()}; }
  std::vector<std::string> output_topics() const override { return {config_.topics.results()}; }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;

  // Folds the calls this stage served before a restart (the live log's
  // execution.completed events), so matching goes on where it stopped.
  void Restore(const std::vector<Event>& events);

 private:
  // The recorded key a live call is matched against.
  CallKey RecordedKey(const CallKey& live) const;

  ReplayStageConfig config_;
  std::mutex mu_;
  std::map<CallKey, size_t> next_;          // live key -> next index to serve
  std::map<std::string, size_t> assigned_;  // org NUL request id -> index it got
};

// The stage `tollgate up --replay-from FROM [--replay-session S]` runs:
// loads the recording at `from` (LoadRecording) and restores what was
// served from the live log, which the pipeline is about to write.
Status MakeReplayStage(const Topics& topics, const std::string& from, const std::string& session,
                       const LogStore& live, std::unique_ptr<Stage>* out);

}  // namespace tollgate::replay
