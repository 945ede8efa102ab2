// NotifyDeliveries: the deliveries of Duragent's `notify` object
// (docs/approvals.md, "Notify deliveries"). For a call whose decision.made
// carried `notify` (a notify pattern matched), once its execution.completed
// is in the log, each delivery of the policy in force for its org and agent
// (the top level's or org section's `notify.deliveries` and the agent's,
// enabled ones only) fires once:
//   log      one line in tollgate's log output (stage "notify");
//   webhook  a POST of JSON (Slack's {text, blocks} for hooks.slack.com or
//            format: slack), signed: X-Tollgate-Signature: sha256=<hex of
//            HMAC-SHA256(secret, X-Tollgate-Timestamp + "." + body)>.
// Never blocks a stage: the listener only queues (bounded, a full queue
// drops and counts); a worker reads the request's events and the sender
// retries with backoff (observe/webhook.h). At most once per request and
// delivery, across restarts: a claim is appended to <data>/notify.state
// before anything is sent, and at start the completions after the state's
// `seen` seq (at most kCatchUpEvents of them) that were not claimed are
// delivered. Run by the process that owns the log: `tollgate up`, or the
// distributed deployment's keeper (deploy/stage_service.h). Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/metrics.h"
#include "audit/log_store.h"
#include "core/event.h"
#include "core/recent_set.h"
#include "core/stage.h"
#include "decide/policy_in_force.h"
#include "observe/webhook.h"

namespace tollgate {

struct NotifyOptions {
  std::string data_dir;                   // notify.state, keys/notify-webhook.secret
  std::string default_secret;             // for a webhook without `secret` (NotifyDefaultSecret)
  std::function<PolicyInForce()> policy;  // the policy in force
  const LogView* view = nullptr;          // the request's events (outlives this)
  WebhookOptions webhook;                 // retries, timeouts (urls unused)
  size_t max_queue = 1000;                // calls waiting for the worker
  // No notify.state yet (a new data dir). true: the log's unclaimed
  // completions (the last kCatchUpEvents) are delivered (`up`: its log and
  // state are made together). false: the log as it is now counts as
  // delivered (a keeper whose copy was just read from the events topic:
  // another keeper, or this one before its disk was lost, sent them).
  bool catch_up_without_state = true;
};

// The secret of webhooks that name none: read from
// <data>/keys/notify-webhook.secret, or derived from the deployment key
// (HMAC label "notify-webhook", hex) and written there 0600.
Status NotifyDefaultSecret(const std::string& data_dir, const std::string& derived_hex, std::string* out);

// HMAC-SHA256(secret, timestamp + "." + body), hex: the signature recipe.
std::string NotifySignature(const std::string& secret, const std::string& timestamp, const std::string& body);

struct RequestState;  // core/request_state.h
class NotifyDeliveries;
// tollgate_notify_deliveries_total{type, outcome}, for a /metrics collector.
void WriteNotifyMetrics(MetricsText& t, const NotifyDeliveries& n);

class NotifyDeliveries {
 public:
  static constexpr uint64_t kCatchUpEvents = 100'000;
  // Loads the state file and delivers what a previous run left undelivered
  // (reading `store` from the state's seen seq to `head_seq`).
  static Status Start(NotifyOptions options, const LogStore& store, uint64_t head_seq,
                      std::unique_ptr<NotifyDeliveries>* out);
  ~NotifyDeliveries();

  // The LogSink listener.
  void OnAppended(const std::vector<Event>& events);
  // The console's base URL (the HTTP API's), for the link in a webhook.
  void SetConsoleBase(const std::string& url);
  // Waits until the queue is empty and no call is being built (tests).
  void Drain();

  std::atomic<uint64_t> logged{0}, webhooks_delivered{0}, webhooks_failed{0}, dropped{0};

 private:
  struct Job {
    std::string org, request_id;
    uint64_t seq = 0;
  };
  explicit NotifyDeliveries(NotifyOptions options);
  void Loop();
  struct Notice;  // what every delivery of one call says
  void Deliver(const Job& job);
  Json DeliveriesOf(const std::string& org, const std::string& agent_id) const;
  Notice MakeNotice(const Job& job, const RequestState& st);  // locks mu_
  void SendWebhook(const Json& del, size_t i, const Job& job, const Notice& n);
  bool Claim(const std::string& org, const std::string& rid, uint64_t seq);  // requires mu_
  void NoteSeen(uint64_t seq, bool force = false);                           // requires mu_

  NotifyOptions options_;
  std::unique_ptr<WebhookNotifier> sender_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<Job> queue_;  // guarded by mu_
  bool busy_ = false, stopping_ = false;
  RecentSet flagged_{100'000};     // requests whose decision asked for notify
  std::set<std::string> claimed_;  // this state's claims (after `seen`)
  uint64_t seen_ = 0, seen_written_ = 0;
  std::string console_base_;
  std::thread thread_;
};

}  // namespace tollgate
