// What `tollgate replay` and the HTTP API run against a log, so that both
// give the same answers: a session's timeline, the hash chain over a
// target's events, and a target's re-decision (verify or what-if). Reads
// through log_source.h; the work itself is the pure timeline.h,
// chain_check.h and redecide.h. Safe on a LogStore that a writer is
// appending to (reads see a consistent prefix).
#pragma once

#include <string>
#include <vector>

#include "audit/log_store.h"
#include "core/status.h"
#include "replay/chain_check.h"
#include "replay/log_source.h"
#include "replay/redecide.h"
#include "replay/timeline.h"

namespace tollgate::replay {

// The timeline of target.session_id (of target.org_id's events alone when
// set). E_NOT_FOUND when the session has no event there.
Status ReadTimeline(const LogStore& store, const Target& target, SessionTimeline* out);

// The chain over the target's events, each checked against its neighbours
// in the log (chain_check.h says what that proves and what it does not).
struct ChainReport {
  size_t events = 0;
  std::vector<ChainProblem> problems;
  bool ok() const { return problems.empty(); }
  // {"events": N, "ok": bool, "problems": [{"seq": N, "error": "..."}]}
  Json ToJson() const;
};
Status CheckTargetChain(const LogStore& store, const Target& target, ChainReport* out);

// Re-decides the target's requests: one thread reads the inputs while the
// calling thread folds them (StreamDecisionInputs into a Redecider).
// E_NOT_FOUND when the target has no event.
Status RedecideTarget(const LogStore& store, const Target& target, const RedecideOptions& options,
                      RedecideReport* out);

// A what-if's candidate policy from its text (YAML or JSON; `source` names
// it in errors): for callers that hold no policy loader (the HTTP API).
Status ParseCandidate(const std::string& text, const std::string& source, PolicyPtr* out);

}  // namespace tollgate::replay
