#include "runtime/committed_outputs.h"

#include <algorithm>
#include <charconv>

#include "core/messages.h"
#include "core/sha256.h"

namespace tollgate {

bool ParseMessageSource(std::string_view source, std::string* incarnation, std::string* topic,
                        int32_t* partition, int64_t* offset) {
  // Kafka topic names have no '/', and neither do incarnations.
  const size_t a = source.find('/');
  if (a == std::string_view::npos) return false;
  const size_t b = source.find('/', a + 1);
  if (b == std::string_view::npos) return false;
  const size_t c = source.find('/', b + 1);
  if (c == std::string_view::npos || source.find('/', c + 1) != std::string_view::npos) return false;
  const std::string_view p = source.substr(b + 1, c - b - 1), o = source.substr(c + 1);
  auto rp = std::from_chars(p.data(), p.data() + p.size(), *partition);
  auto ro = std::from_chars(o.data(), o.data() + o.size(), *offset);
  if (rp.ec != std::errc() || rp.ptr != p.data() + p.size() || ro.ec != std::errc() ||
      ro.ptr != o.data() + o.size() || p.empty() || o.empty() || *partition < 0 || *offset < 0) {
    return false;
  }
  incarnation->assign(source.substr(0, a));
  topic->assign(source.substr(a + 1, b - a - 1));
  return true;
}

CommittedOutputs::CommittedOutputs(std::string incarnation, std::vector<std::string> input_topics)
    : incarnation_(std::move(incarnation)), inputs_(input_topics.begin(), input_topics.end()) {}

CommittedOutputs::Fingerprint CommittedOutputs::FingerprintOf(const Message& m) {
  // Lengths first, so that no two different (topic, key, value) run together
  // into the same bytes.
  const std::string lengths = std::to_string(m.topic.size()) + "," + std::to_string(m.key.size()) + "," +
                              std::to_string(m.value.size());
  const Digest d = Sha256({lengths, m.topic, m.key, m.value});
  Fingerprint f;
  std::copy(d.begin(), d.begin() + f.size(), f.begin());
  return f;
}

bool CommittedOutputs::Locate(const Message& m, TopicPartition* tp, int64_t* offset) const {
  auto h = m.headers.find(kHeaderSource);
  if (h == m.headers.end()) return false;
  std::string incarnation;
  if (!ParseMessageSource(h->second, &incarnation, &tp->first, &tp->second, offset)) return false;
  return incarnation == incarnation_ && inputs_.count(tp->first) > 0;
}

void CommittedOutputs::Add(const Message& m) {
  TopicPartition tp;
  int64_t offset = 0;
  if (!Locate(m, &tp, &offset)) return;
  auto c = committed_.find(tp);
  if (c != committed_.end() && offset < c->second) return;
  if (by_input_[tp][offset].insert(FingerprintOf(m)).second) ++size_;
}

bool CommittedOutputs::Contains(const Message& out) const {
  if (by_input_.empty()) return false;
  TopicPartition tp;
  int64_t offset = 0;
  if (!Locate(out, &tp, &offset)) return false;
  auto p = by_input_.find(tp);
  if (p == by_input_.end()) return false;
  auto o = p->second.find(offset);
  if (o == p->second.end()) return false;
  return o->second.count(FingerprintOf(out)) > 0;
}

void CommittedOutputs::ForgetBelow(const std::map<TopicPartition, int64_t>& next) {
  for (const auto& [tp, upto] : next) {
    auto p = by_input_.find(tp);
    if (p == by_input_.end()) continue;
    auto end = p->second.lower_bound(upto);
    for (auto it = p->second.begin(); it != end; ++it) size_ -= it->second.size();
    p->second.erase(p->second.begin(), end);
    if (p->second.empty()) by_input_.erase(p);
  }
}

}  // namespace tollgate
