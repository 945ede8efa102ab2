// ApprovalWebhooks: an observer of the log that POSTs to the approvers'
// webhooks (`up --webhook URL`; docs/approvals.md "Webhooks"):
//   - when an approval is requested (approval.requested), with who must
//     answer, the deadline and the decision's reason;
//   - after an execution (execution.completed) whose decision.made carried
//     a non-empty "notify" (the policy's notify patterns that matched).
// It folds appended events only (core/stage.h LogSubscriber): the approve
// stage knows nothing of it. A decision made before this process started
// is read from the log (`view`), once per completed call.
// Delivery is a courtesy through the shared poster (observe/webhook.h): at
// most once per event id, bounded queue; the log is the record.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/recent_set.h"
#include "core/stage.h"
#include "observe/webhook.h"

namespace tollgate {

class ApprovalWebhooks : public LogSubscriber {
 public:
  // `view` reads the log itself (never a cache that lags listeners);
  // outlives this.
  ApprovalWebhooks(WebhookOptions options, const LogView* view);
  void OnAppended(const std::vector<Event>& events) override;

  const WebhookNotifier& poster() const { return poster_; }
  // Decisions read from the log for a completed call (tests).
  uint64_t history_reads() const { return history_reads_.load(); }

 private:
  // One decision's notify patterns, rule, reason and danger level.
  struct Decided {
    Json notify;  // array; empty: no notification after the execution
    std::string rule, reason, danger_level;
  };
  static Decided DecidedOf(const Json& decision);
  Json RequestedNotice(const Event& e) const;  // requires mu_
  static Json CompletedNotice(const Event& e, const Decided& d);

  WebhookNotifier poster_;
  const LogView* view_;
  std::mutex mu_;
  RecentSet notified_{100'000};  // event ids notified (the last ones); guarded by mu_
  // Requests whose decision.made this observer saw and that have not
  // finished: an execution.completed is matched here without reading the
  // log. Keyed by (org, request_id); guarded by mu_.
  std::map<std::string, Decided> decided_;
  std::atomic<uint64_t> history_reads_{0};
};

}  // namespace tollgate
