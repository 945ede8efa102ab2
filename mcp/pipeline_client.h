// The gateway's side of the bus: it publishes the signed tool requests (and
// withdrawals) of every MCP session of this process and hands each waiting
// call its result from its org's results topic.
//
// A result is believed only when the gate signed it for exactly the
// waiting call's (org, agent, request_id) (core/result_signature.h): a
// message anyone else wrote on a results topic, or the gate's result of
// another request, never ends a call. Each org's topic gets one tail
// consumer, opened by the first Expect for that org, before anything of it
// is published, so a result cannot slip past between a send and its wait.
//
// A deployment that restarts (`up`: a new embedded broker, maybe on other
// ports) is followed when Follow() is given where to look: the client
// reconnects, opens its tails anew, and each waiting call sends its request
// again (Waiter::OnReconnect), so it still gets its result. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/canonical_json.h"
#include "core/jwt.h"
#include "core/message.h"
#include "core/status.h"
#include "runtime/kafka_bus.h"

namespace tollgate::mcp {

// The gate's active public keys, asked for at each result (so a key
// registered later counts at once).
using GateKeys = std::function<std::vector<Ed25519Verifier>()>;

class PipelineClient {
 public:
  static Status Open(const BusConfig& bus, GateKeys gate_keys, std::unique_ptr<PipelineClient>* out);
  ~PipelineClient();

  // Where the bus is now and which incarnation of the deployment serves it
  // (for `up`: its pid; DATA/endpoints.json says both). An error: not known
  // now (the deployment is restarting); asked again later.
  using BusSource = std::function<Status(BusConfig* bus, std::string* incarnation)>;
  // Asks `source` every `every`; when the incarnation changes, reconnects
  // (producer and tails on the new bus; the topics' names stay) and runs the
  // waiters' OnReconnect. Call once, before calls are made.
  void Follow(BusSource source, std::chrono::milliseconds every = std::chrono::seconds(1));

  const Topics& topics() const { return topics_; }

  // One expected result. Create it before publishing the request.
  class Waiter {
   public:
    // The final result, or nullopt when `until` passed or `stop()` became
    // true (checked every 100 ms; `tick()`, when set, runs at each check
    // too). Both run without the waiter's lock, so they may call pending().
    std::optional<Json> Wait(std::chrono::steady_clock::time_point until, const std::function<bool()>& stop,
                             const std::function<void()>& tick = nullptr);
    // The last signed `pending` message (approval requested), if any.
    std::optional<Json> pending();
    // Runs after each reconnect (Follow), outside the client's locks.
    void OnReconnect(std::function<void()> f);

   private:
    friend class PipelineClient;
    std::string agent;
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Json> result;
    std::optional<Json> pending_;
    std::function<void()> on_reconnect;  // guarded by mu
  };
  // E_KAFKA (and a null waiter) when the org's results topic cannot be
  // read.
  Status Expect(const std::string& org_id, const std::string& agent_id, const std::string& request_id,
                std::shared_ptr<Waiter>* out);
  void Forget(const std::string& org_id, const std::string& request_id);

  // Publishes and flushes (at most `timeout`).
  Status Publish(const Message& m, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Publishes what `make` builds; when the bus does not take it (down, or
  // restarting), builds and publishes it again every second (and at once
  // after a reconnect) until it does, so it is never lost while this
  // process lives. For withdrawals, whose signature must be fresh. At most
  // kMaxRetried wait; past that the oldest is dropped, logged.
  using MakeMessage = std::function<Status(Message* out)>;
  void PublishOrRetry(MakeMessage make);
  static constexpr size_t kMaxRetried = 4096;
  // Reconnections made (Follow).
  uint64_t reconnects() const { return reconnects_.load(); }

  // Messages on a results topic that were not a result the gate signed for
  // a waiting call (forgeries, another request's result copied).
  uint64_t refused() const { return refused_.load(); }

 private:
  // One results topic read from its end, by a thread of its own.
  struct Tail {
    std::unique_ptr<Consumer> consumer;
    std::thread thread;
    std::atomic<bool> stop{false};
  };
  PipelineClient() = default;
  // Opens the tail of `topic` once; the caller holds tails_mu_.
  Status TailLocked(const std::string& topic);
  static Status OpenTail(const BusConfig& bus, const std::string& topic, std::unique_ptr<Tail>* out);
  void Start(Tail* t);
  void Dispatch(Tail* t);
  void Deliver(const Message& m);
  // Follow's thread: watches the source, reconnects, retries.
  void Maintain();
  Status Reconnect(const BusConfig& bus);
  void RetryPending();

  BusConfig bus_;  // guarded by tails_mu_ (its topics never change)
  Topics topics_;  // bus_.topics, read without a lock
  GateKeys gate_keys_;
  std::unique_ptr<Producer> producer_;
  std::mutex producer_mu_;
  std::mutex tails_mu_;
  std::map<std::string, std::unique_ptr<Tail>> tails_;  // by topic; guarded by tails_mu_
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Waiter>> waiters_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0}, reconnects_{0};
  // Follow's state.
  std::mutex follow_mu_;
  std::condition_variable follow_cv_;
  BusSource source_;         // guarded by follow_mu_
  std::string incarnation_;  // guarded by follow_mu_
  std::chrono::milliseconds every_{1000};
  std::deque<MakeMessage> retry_;  // guarded by follow_mu_
  std::thread maintainer_;
};

}  // namespace tollgate::mcp
