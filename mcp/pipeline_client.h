// The gateway's side of the bus: it publishes the signed tool requests (and
// withdrawals) of every MCP session of this process and hands each waiting
// call its result from tollgate.results.
//
// One tail consumer of the results topic, opened before anything is
// published, serves every waiter, so a result cannot slip past between a
// send and its wait. A result names (org_id, request_id); a waiter gets only
// the result of its own org's request. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/canonical_json.h"
#include "core/message.h"
#include "core/status.h"
#include "runtime/kafka_bus.h"

namespace tollgate::mcp {

class PipelineClient {
 public:
  static Status Open(const BusConfig& bus, std::unique_ptr<PipelineClient>* out);
  ~PipelineClient();

  const Topics& topics() const { return bus_.topics; }

  // One expected result. Create it before publishing the request.
  class Waiter {
   public:
    // The result, or nullopt when `until` passed or `stop()` became true
    // (checked every 100 ms; `tick()`, when set, runs at each check too).
    std::optional<Json> Wait(std::chrono::steady_clock::time_point until, const std::function<bool()>& stop,
                             const std::function<void()>& tick = nullptr);

   private:
    friend class PipelineClient;
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Json> result;
  };
  std::shared_ptr<Waiter> Expect(const std::string& org_id, const std::string& request_id);
  void Forget(const std::string& org_id, const std::string& request_id);

  // Publishes and flushes (at most `timeout`).
  Status Publish(const Message& m, std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  PipelineClient() = default;
  void Dispatch();

  BusConfig bus_;
  std::unique_ptr<Producer> producer_;
  std::mutex producer_mu_;
  std::unique_ptr<Consumer> results_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Waiter>> waiters_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tollgate::mcp
