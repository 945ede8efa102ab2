// A histogram of durations for /metrics, recorded lock-free from a hot
// thread (the stage runner, per batch) and read at scrape time. Buckets are
// fixed (kLatencyBounds, seconds), as Prometheus histograms need.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace tollgate {

inline constexpr std::array<double, 14> kLatencyBounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,    0.25,  0.5,    1,     2.5,  5,     10};

class LatencyHistogram {
 public:
  void Record(uint64_t micros) {
    const double s = static_cast<double>(micros) / 1e6;
    size_t i = 0;
    while (i < kLatencyBounds.size() && s > kLatencyBounds[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(micros, std::memory_order_relaxed);
  }
  // Per bucket, not cumulative; the last is above every bound.
  std::array<uint64_t, kLatencyBounds.size() + 1> counts() const {
    std::array<uint64_t, kLatencyBounds.size() + 1> out{};
    for (size_t i = 0; i < out.size(); ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
    return out;
  }
  double sum_seconds() const { return static_cast<double>(sum_us_.load(std::memory_order_relaxed)) / 1e6; }

 private:
  std::array<std::atomic<uint64_t>, kLatencyBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_us_{0};
};

}  // namespace tollgate
