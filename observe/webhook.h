// WebhookNotifier: POSTs JSON notifications (an approval was requested) to
// configured URLs from a background thread, so the stage never waits on a
// network. The queue is bounded: when it is full a notification is dropped
// and counted, never blocking the caller. A delivery is retried with
// exponential backoff until a 2xx answer or max_attempts; then it is counted
// as failed and reported on stderr. Delivery is at most once per
// Enqueue: notifications are a courtesy to approvers, the log is the record
// (a crash between the append and the delivery loses the notification).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/canonical_json.h"

namespace tollgate {

struct WebhookOptions {
  std::vector<std::string> urls;
  size_t max_queue = 1000;  // deliveries waiting (one per URL and notification)
  int max_attempts = 5;
  std::chrono::milliseconds first_backoff{200};  // doubled per retry
  std::chrono::milliseconds max_backoff{10000};
  long timeout_ms = 5000;  // per attempt
  // Who posts, in log lines and the User-Agent (the OTLP exporter reuses
  // this queue: observe/otlp_export.h).
  std::string what = "webhook";
  std::string log_stage = "approve";
  std::string user_agent = "tollgate-webhook/1";
};

class WebhookNotifier {
 public:
  explicit WebhookNotifier(WebhookOptions options);
  // Stops the thread: the attempt in flight finishes, queued deliveries are dropped.
  ~WebhookNotifier();

  // Queues `body` for every URL; false if some delivery had to be dropped.
  bool Enqueue(const Json& body);
  // Queues one delivery of `body` (sent as is) to `url` with more headers
  // ("Name: value"); `done(ok)` is called on the sender thread once it was
  // delivered or given up (not when dropped: then false is returned).
  bool EnqueueTo(const std::string& url, std::string body, std::vector<std::string> headers,
                 std::function<void(bool ok)> done = nullptr);

  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> attempts{0};

 private:
  struct Delivery {
    std::string url;
    std::string body;
    std::vector<std::string> headers;
    std::function<void(bool ok)> done;
  };
  void Loop();
  // One POST; true on a 2xx answer.
  bool Post(const Delivery& d, std::string* error);

  WebhookOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Delivery> queue_;  // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::thread thread_;
};

}  // namespace tollgate
