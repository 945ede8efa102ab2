// The approve stage's state: the pending approvals (deadline, quorum, the
// distinct approvers so far), a fold over the log's events. One fold for
// both the load at start (ApproveStage::Load) and the LogSink listener
// (ApproveStage::OnAppended), read by Tick to know when to look.
//
// Pending is RequestState's rule (core/request_state.h, and
// core/pending_approval.h for the log's view): approval.requested, not
// settled by the quorum of distinct granters, a denial or an expiry, and
// not ended by the pipeline (request.rejected E_REQUEST_LOST or
// E_OUTPUT_TOO_LARGE) or by an execution.completed. Events before a
// request's approval.requested are not read: the approve stage asks only
// for a live request with an ask decision, so they cannot have ended it
// (and reading them would keep a record of every request). The decisions
// themselves always come from the log: Tick re-reads a due request and
// Forget()s one the log says is not pending.
//
// Apply is idempotent: the same event twice changes nothing (grants count
// once per approver; a settled approval stays settled, even if its
// approval.requested is applied again). A value type with no locking.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/event.h"
#include "core/recent_set.h"

namespace tollgate {

class PendingApprovals {
 public:
  struct Held {
    std::string org_id, request_id, agent_id;
    int64_t deadline_us = 0;
    int needed = 1;
    std::vector<std::string> granted_by;  // distinct approvers, in log order
  };

  void Apply(const Event& e);
  // Drops a request from the pending ones (the log says it is not pending).
  void Forget(const std::string& org_id, const std::string& request_id);

  // The pending approval of (org, request), or null.
  const Held* Find(const std::string& org_id, const std::string& request_id) const;
  // Whether the approval of (org, request) was settled or its request ended.
  bool finished(const std::string& org_id, const std::string& request_id) const;
  // By RequestKey(org, request_id).
  const std::map<std::string, Held>& held() const { return held_; }
  size_t size() const { return held_.size(); }
  // Pending approvals of one (org, agent): what its cap counts
  // (ApproveConfig::max_pending_per_agent).
  size_t HeldBy(const std::string& org_id, const std::string& agent_id) const;
  // The earliest deadline, 0 when nothing is pending.
  int64_t next_deadline_us() const;
  // (org, request_id) of the approvals whose deadline is at or before now.
  std::vector<std::pair<std::string, std::string>> Due(int64_t now_us) const;

 private:
  void Finish(const std::string& key);
  void Erase(const std::string& key);
  std::map<std::string, Held> held_;
  std::map<std::pair<std::string, std::string>, size_t> per_agent_;  // (org, agent) -> held
  // Settled or ended: the last 100,000, to ignore their late events (which
  // come soon after or never), so a long run's memory stays bounded.
  RecentSet finished_{100'000};
};

}  // namespace tollgate
