// CommittedOutputs: which outputs of a stage's inputs are already committed
// on its output topics, so that a message read again does not send them
// twice.
//
// Why: a stage commits its outputs and its input offsets in one Kafka
// transaction, but the embedded broker (librdkafka's mock cluster) does not
// store offsets committed in a transaction, and deferred work commits
// offsets only up to the lowest unfinished message. Either way a restarted
// stage reads again messages whose outputs already went out, and, being
// deterministic, makes the same outputs once more. Every output carries the
// source of its input (header kHeaderSource); at start the runner reads
// back the committed tail of the output topics into this set, and drops a
// re-made output whose source, topic, key and value are all there: the
// readers of that topic already have exactly those bytes. An output that
// differs in any byte is sent. Nothing is dropped on a guess: an output not
// found (the read-back was cut short, or went less far back than the
// re-read) is sent again, never lost.
//
// Pure bookkeeping, no Kafka. Not thread-safe: the runner thread owns it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/kafka_bus.h"

namespace tollgate {

// "<incarnation>/<topic>/<partition>/<offset>" (StageContext::source of a
// message) -> its parts; false for anything else (a tick's source).
bool ParseMessageSource(std::string_view source, std::string* incarnation, std::string* topic,
                        int32_t* partition, int64_t* offset);

class CommittedOutputs {
 public:
  using TopicPartition = std::pair<std::string, int32_t>;
  // Only outputs made from `input_topics` under `incarnation` are kept.
  CommittedOutputs(std::string incarnation, std::vector<std::string> input_topics);

  // Inputs below `committed` (the group's committed offsets) are not read
  // again: Add ignores their outputs. Partitions not named keep all.
  void SetCommitted(std::map<TopicPartition, int64_t> committed) { committed_ = std::move(committed); }
  // `m` was read back, committed, from an output topic. Ignored unless its
  // kHeaderSource names one of our inputs under our incarnation, at or past
  // the committed offset.
  void Add(const Message& m);
  // True if `out` (with kHeaderSource set, as it would be sent) is already
  // committed: the caller must not send it. However often an input is read
  // again, its readers have that copy.
  bool Contains(const Message& out) const;
  // Inputs below `next` (offsets being committed) are not read again.
  void ForgetBelow(const std::map<TopicPartition, int64_t>& next);
  bool empty() const { return by_input_.empty(); }
  // Distinct outputs held.
  size_t size() const { return size_; }

 private:
  using Fingerprint = std::array<uint8_t, 16>;  // of topic, key and value
  static Fingerprint FingerprintOf(const Message& m);
  bool Locate(const Message& m, TopicPartition* tp, int64_t* offset) const;

  std::string incarnation_;
  std::set<std::string> inputs_;
  // input partition -> input offset -> fingerprints of its committed outputs
  std::map<TopicPartition, int64_t> committed_;
  std::map<TopicPartition, std::map<int64_t, std::set<Fingerprint>>> by_input_;
  size_t size_ = 0;
};

}  // namespace tollgate
