#include "audit/append_future.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace tollgate::detail {

namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");

uint32_t* Word(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }

}  // namespace

void AppendSlot::Complete(AppendResult r) {
  result_ = std::move(r);
  // The syscall only when the caller announced that it sleeps (kWaiting).
  // This thread still holds its reference, so the word outlives the wake.
  if (state_.exchange(kReady, std::memory_order_acq_rel) == kWaiting) {
    syscall(SYS_futex, Word(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
}

void AppendSlot::Wait() {
  uint32_t s = state_.load(std::memory_order_acquire);
  if (s == kReady) return;
  if (s == kPending && !state_.compare_exchange_strong(s, kWaiting, std::memory_order_acq_rel)) {
    return;  // completed meanwhile: s is kReady
  }
  while (state_.load(std::memory_order_acquire) != kReady) {
    syscall(SYS_futex, Word(&state_), FUTEX_WAIT_PRIVATE, kWaiting, nullptr, nullptr, 0);
  }
}

}  // namespace tollgate::detail
