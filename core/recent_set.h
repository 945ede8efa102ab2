// RecentSet: a set of keys that remembers only the most recent `capacity`
// insertions (the oldest is forgotten first). For state that guards against
// late or repeated events, which arrive soon after the first or not at all,
// so a long run's memory stays bounded. Not thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <unordered_set>

namespace tollgate {

class RecentSet {
 public:
  explicit RecentSet(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  // True when `key` was not remembered (it is now).
  bool insert(const std::string& key) {
    if (!keys_.insert(key).second) return false;
    order_.push_back(key);
    while (order_.size() > capacity_) {
      keys_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  bool count(const std::string& key) const { return keys_.count(key) != 0; }
  size_t size() const { return keys_.size(); }

 private:
  size_t capacity_;
  std::unordered_set<std::string> keys_;
  std::deque<std::string> order_;
};

}  // namespace tollgate
