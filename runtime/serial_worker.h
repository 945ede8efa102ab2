// SerialWorker: one background thread that runs one task at a time, so its
// owner can overlap a blocking step (a Kafka transaction) with preparing the
// next one (reading, processing and appending the next batch).
//
// The owner hands a task over, goes on, and collects its outcome before it
// hands over the next: tasks run one at a time, in the order handed over,
// and each outcome is collected exactly once.
//
// Thread-safety: Hand, Collect and outstanding are called by one owner
// thread; the task runs on the worker's thread. The destructor waits until
// a task handed over has run (its outcome, if not collected, is dropped).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "core/status.h"

namespace tollgate {

class SerialWorker {
 public:
  SerialWorker();
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Requires !outstanding(): the previous task's outcome was collected.
  void Hand(std::function<Status()> task);
  // A task was handed over and its outcome not yet collected.
  bool outstanding() const { return outstanding_; }
  // The outcome of the task handed over last, once. Nothing outstanding:
  // Ok. Still running: waits when `wait`, else returns nullopt.
  std::optional<Status> Collect(bool wait);
  // Waits until the task handed over last has run, leaving its outcome to
  // be collected. Nothing outstanding: returns at once.
  void WaitIdle();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<Status()> todo_;  // guarded by mu_
  std::optional<Status> done_;    // guarded by mu_
  bool stop_ = false;             // guarded by mu_
  bool outstanding_ = false;      // owner thread only
  std::thread thread_;
};

}  // namespace tollgate
