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
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
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

  const Topics& topics() const { return bus_.topics; }

  // One expected result. Create it before publishing the request.
  class Waiter {
   public:
    // The final result, or nullopt when `until` passed or `stop()` became
    // true (checked every 100 ms; `tick()`, when set, runs at each check
    // too).
    std::optional<Json> Wait(std::chrono::steady_clock::time_point until, const std::function<bool()>& stop,
                             const std::function<void()>& tick = nullptr);
    // The last signed `pending` message (approval requested), if any.
    std::optional<Json> pending();

   private:
    friend class PipelineClient;
    std::string agent;
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Json> result;
    std::optional<Json> pending_;
  };
  // E_KAFKA (and a null waiter) when the org's results topic cannot be
  // read.
  Status Expect(const std::string& org_id, const std::string& agent_id, const std::string& request_id,
                std::shared_ptr<Waiter>* out);
  void Forget(const std::string& org_id, const std::string& request_id);

  // Publishes and flushes (at most `timeout`).
  Status Publish(const Message& m, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Messages on a results topic that were not a result the gate signed for
  // a waiting call (forgeries, another request's result copied).
  uint64_t refused() const { return refused_.load(); }

 private:
  PipelineClient() = default;
  // Opens the tail of `topic` once; the caller holds tails_mu_.
  Status TailLocked(const std::string& topic);
  void Dispatch(Consumer* c);
  void Deliver(const Message& m);

  BusConfig bus_;
  GateKeys gate_keys_;
  std::unique_ptr<Producer> producer_;
  std::mutex producer_mu_;
  std::mutex tails_mu_;
  std::map<std::string, std::unique_ptr<Consumer>> tails_;  // by topic; guarded by tails_mu_
  std::vector<std::thread> threads_;                        // guarded by tails_mu_
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Waiter>> waiters_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace tollgate::mcp
