// AppendResult and AppendFuture: what an EventLog append hands back.
//
// AppendFuture stands in for std::future<AppendResult>, which costs the
// log's completing thread a call_once and an unconditional futex wake per
// event (glibc's pthread_once) plus two allocations per append. Here one
// slot, allocated by the appending thread, is shared by the future and the
// log's queued item; completing it is a store and an atomic exchange, and a
// futex wake only when the caller is already blocked in get() or wait().
//
// Thread-safety: like std::future, one AppendFuture is used by one thread at
// a time; the log completes it from its own threads. Dropping a future
// before it is ready is fine: the append still happens (the slot is freed by
// whichever side lets go last).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "core/status.h"

namespace tollgate {

class EventLog;

struct AppendResult {
  Status status;
  uint64_t seq = 0;        // valid when status.ok()
  bool duplicate = false;  // the id was already in the log
  std::string hash;        // hex hash of the record at seq

  static AppendResult Error(Status s) {
    AppendResult r;
    r.status = std::move(s);
    return r;
  }
};

namespace detail {

// The state one append's caller and the log share. Made with two references
// (the future's and the log's); each side calls Unref() once.
class AppendSlot {
 public:
  static AppendSlot* New() { return new AppendSlot(); }
  AppendSlot(const AppendSlot&) = delete;
  AppendSlot& operator=(const AppendSlot&) = delete;

  // The log's side, exactly once: publishes the result, wakes a blocked waiter.
  void Complete(AppendResult r);
  // The caller's side.
  bool ready() const { return state_.load(std::memory_order_acquire) == kReady; }
  void Wait();
  AppendResult Take() { return std::move(result_); }  // after Wait()

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  AppendSlot() = default;
  static constexpr uint32_t kPending = 0, kWaiting = 1, kReady = 2;
  std::atomic<uint32_t> state_{kPending};  // a futex word
  std::atomic<uint32_t> refs_{2};
  AppendResult result_;  // written by the completer before state_ = kReady
};

// Owns one reference to a slot.
class SlotRef {
 public:
  SlotRef() = default;
  explicit SlotRef(AppendSlot* s) : slot_(s) {}
  SlotRef(SlotRef&& o) noexcept : slot_(std::exchange(o.slot_, nullptr)) {}
  SlotRef& operator=(SlotRef&& o) noexcept {
    if (this != &o) {
      Reset();
      slot_ = std::exchange(o.slot_, nullptr);
    }
    return *this;
  }
  ~SlotRef() { Reset(); }
  AppendSlot* get() const { return slot_; }
  AppendSlot* operator->() const { return slot_; }
  explicit operator bool() const { return slot_ != nullptr; }

 private:
  void Reset() {
    if (slot_ != nullptr) std::exchange(slot_, nullptr)->Unref();
  }
  AppendSlot* slot_ = nullptr;
};

}  // namespace detail

class AppendFuture {
 public:
  AppendFuture() = default;  // not valid()
  explicit AppendFuture(detail::SlotRef slot) : slot_(std::move(slot)) {}
  AppendFuture(AppendFuture&&) noexcept = default;
  AppendFuture& operator=(AppendFuture&&) noexcept = default;

  bool valid() const { return static_cast<bool>(slot_); }
  // True once the append is complete (get() will not block). Requires valid().
  bool ready() const { return slot_->ready(); }
  // Blocks until the append is complete. Requires valid().
  void wait() const { slot_->Wait(); }
  // Waits, then returns the result and leaves the future not valid().
  AppendResult get() {
    slot_->Wait();
    return Take();
  }

 private:
  AppendResult Take() {
    AppendResult r = slot_->Take();
    slot_ = detail::SlotRef();
    return r;
  }

  detail::SlotRef slot_;
};

}  // namespace tollgate
