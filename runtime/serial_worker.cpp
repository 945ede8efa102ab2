#include "runtime/serial_worker.h"

namespace tollgate {

SerialWorker::SerialWorker() : thread_([this] { Loop(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SerialWorker::Loop() {
  for (;;) {
    std::function<Status()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || todo_ != nullptr; });
      if (todo_ == nullptr) return;  // stopping with nothing handed over
      task = std::move(todo_);
      todo_ = nullptr;
    }
    Status s = task();
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = std::move(s);
    }
    cv_.notify_all();
  }
}

void SerialWorker::Hand(std::function<Status()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.reset();
    todo_ = std::move(task);
  }
  outstanding_ = true;
  cv_.notify_all();
}

void SerialWorker::WaitIdle() {
  if (!outstanding_) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_.has_value(); });
}

std::optional<Status> SerialWorker::Collect(bool wait) {
  if (!outstanding_) return Status::Ok();
  std::unique_lock<std::mutex> lock(mu_);
  if (wait) {
    cv_.wait(lock, [this] { return done_.has_value(); });
  } else if (!done_.has_value()) {
    return std::nullopt;
  }
  Status s = std::move(*done_);
  done_.reset();
  outstanding_ = false;
  return s;
}

}  // namespace tollgate
