// The Kafka transport: topic names, an embedded Kafka-protocol broker
// (librdkafka's mock cluster), and thin producer/consumer wrappers.
//
// Every stage talks to Kafka only through these types, and only the stage
// runner (runtime/stage_runner.h) uses them; stage cores never see Kafka.
// Producer and consumer are each used from one thread at a time, except
// where a method says otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/message.h"
#include "core/status.h"

struct rd_kafka_s;
struct rd_kafka_mock_cluster_s;

namespace tollgate {

struct BusConfig {
  std::string brokers;  // bootstrap.servers
  Topics topics;
  int partitions = 3;  // for topics tollgate creates
  std::string client_id = "tollgate";
  // Extra librdkafka properties applied to every client (e.g. security).
  std::map<std::string, std::string> extra;
  // Latency first (docs/operations.md): consumers' fetches return after
  // 1 ms instead of 5 when there is nothing, producers send at once
  // (linger 0, not 2 ms). Every guarantee stays (transactions, log before
  // output); the cost is idle CPU on the broker and clients.
  bool latency_first = false;
};

// librdkafka's Kafka-protocol mock cluster, in this process, listening on
// 127.0.0.1. Keeps data in memory only. Thread-safe.
class EmbeddedBroker {
 public:
  // `bootstrap_port` -1: bootstrap() is the mock's own listener, whose port
  // librdkafka picks anew at every start. 0..65535: a TcpForward on
  // 127.0.0.1:bootstrap_port (0: any free port) in front of it, and
  // bootstrap() names that, so a restart can keep the address clients
  // bootstrap from (`up --broker-port`). E_INVALID_REQUEST when the port is
  // taken.
  static Status Start(int brokers, std::unique_ptr<EmbeddedBroker>* out, int bootstrap_port = -1);
  ~EmbeddedBroker();
  const std::string& bootstrap() const { return bootstrap_; }
  Status CreateTopic(const std::string& topic, int partitions);
  // Fault injection for tests, through the mock cluster's own controls.
  Status SetBrokerDown(int32_t broker_id);
  Status SetBrokerUp(int32_t broker_id);
  // The next `count` requests of Kafka API `api_key` (0 = Produce, 1 =
  // Fetch, 8 = OffsetCommit, ...) fail with `error` (an rd_kafka_resp_err_t).
  void PushRequestErrors(int16_t api_key, int count, int error);

 private:
  EmbeddedBroker() = default;
  rd_kafka_s* handle_ = nullptr;
  rd_kafka_mock_cluster_s* cluster_ = nullptr;
  std::unique_ptr<class TcpForward> forward_;  // with a bootstrap_port
  std::string bootstrap_;
};

// How many partitions tollgate creates `topic` with: config.partitions, but
// one for the events topic (one total order; docs/deployments.md).
int PartitionsOf(const BusConfig& config, const std::string& topic);

// The partition of `partitions` that Producer sends a message keyed `key`
// to (murmur2, as Java clients): for callers that spread keys evenly.
int32_t PartitionOfKey(const std::string& key, int32_t partitions);

// Creates the topics of `config` that are missing (admin API; the events
// topic with one partition and no retention limit), and checks that those
// present have at least one partition and the events topic exactly one.
// Works against the embedded broker and Apache Kafka alike.
Status EnsureTopics(const BusConfig& config, std::chrono::milliseconds timeout);

// Makes sure `topic` exists (created with PartitionsOf partitions where
// the broker takes CreateTopics, else by the broker's auto-creation),
// waiting until its metadata shows it: the per-org results topics, made
// when an org's first result or first waiter appears.
Status EnsureTopic(const BusConfig& config, const std::string& topic, std::chrono::milliseconds timeout);
// The names of the existing topics that start with `prefix`, sorted.
Status ListTopics(const BusConfig& config, const std::string& prefix, std::chrono::milliseconds timeout,
                  std::vector<std::string>* out);

// An idempotent producer (acks=all, murmur2 partitioner so Java clients
// agree on partitions), optionally transactional.
class Producer {
 public:
  // `transactional_id` empty = plain idempotent producer.
  static Status Open(const BusConfig& config, const std::string& transactional_id,
                     std::unique_ptr<Producer>* out);
  ~Producer();

  // Queues a message; delivery is confirmed by Flush() (or by committing
  // the transaction). Keyed messages go to murmur2(key) % partitions.
  Status Send(const Message& m);
  // Waits until everything queued is delivered; fails if any delivery failed
  // since the last Flush.
  Status Flush(std::chrono::milliseconds timeout);
  // Learns the topics' metadata now, so a producer kept open for later
  // single sends (the MCP gateway) does not hold its first message for
  // librdkafka's ~1 s refresh of an unknown topic.
  Status Warm(const std::vector<std::string>& topics, std::chrono::milliseconds timeout);

  // Transactions (transactional producers only). On an error whose
  // code is E_TXN_ABORTABLE the caller must AbortTransaction and retry the
  // batch; other errors are fatal for this producer.
  Status BeginTransaction();
  // Commits the consumer's offsets (next offset to read, per partition)
  // in the current transaction.
  Status SendOffsets(const class Consumer& consumer,
                     const std::map<std::pair<std::string, int32_t>, int64_t>& next_offsets,
                     std::chrono::milliseconds timeout);
  Status CommitTransaction(std::chrono::milliseconds timeout);
  Status AbortTransaction(std::chrono::milliseconds timeout);

  // The largest Message::bytes() this producer sends: kMaxMessageBytes, or
  // less when BusConfig::extra sets a lower message.max.bytes.
  size_t max_message_bytes() const { return max_message_bytes_; }

  struct DeliveryState;  // shared with librdkafka's delivery callback

 private:
  Producer() = default;
  size_t max_message_bytes_ = kMaxMessageBytes;
  rd_kafka_s* rk_ = nullptr;
  bool transactional_ = false;
  std::unique_ptr<DeliveryState> delivery_;
};

// A consumer in a group with manual offset commits, reading committed data
// only. Offset loss (the broker dropped data the group had not read) is
// reported, never skipped silently: Poll returns E_OFFSET_LOST once and then
// continues from the earliest offset still held.
class Consumer {
 public:
  static Status Open(const BusConfig& config, const std::string& group,
                     const std::vector<std::string>& topics, std::unique_ptr<Consumer>* out);
  // A consumer outside any group that reads `topic` from its current end
  // (every partition's high watermark, fetched before this returns), so
  // nothing published after Open is missed. No group join: ready at once.
  // For one-shot readers such as `tollgate submit --wait`; Commit fails.
  static Status OpenTail(const BusConfig& config, const std::string& topic, std::chrono::milliseconds timeout,
                         std::unique_ptr<Consumer>* out);
  // The same over several topics.
  static Status OpenTail(const BusConfig& config, const std::vector<std::string>& topics,
                         std::chrono::milliseconds timeout, std::unique_ptr<Consumer>* out);
  ~Consumer();

  // Up to `max` messages, waiting at most `timeout` for the first.
  Status Poll(size_t max, std::chrono::milliseconds timeout, std::vector<Message>* out);
  // Commits next offsets (non-transactional use). `async`: queue the commit
  // and return; a lost async commit only means re-reading (callers dedupe).
  Status Commit(const std::map<std::pair<std::string, int32_t>, int64_t>& next_offsets, bool async = false);
  // Rewinds every assigned partition to its committed offset (after an
  // aborted transaction, so the batch is read again).
  Status RewindToCommitted();
  // Called (on the thread in Poll) when the group takes this consumer's
  // partitions away, before it lets go of them: the moment to finish
  // committing what was read, because the next owner (this consumer again,
  // after a rebalance) starts at the committed offsets. Set before the
  // first Poll.
  void SetBeforeRevoke(std::function<void()> f) { before_revoke_ = std::move(f); }
  // Called (on the thread in Poll) when the group hands this consumer
  // partitions, before anything is fetched from them: the moment to learn
  // what the previous owner committed (its outputs may be past the
  // committed offsets when the broker refused its offset commit). Set
  // before the first Poll.
  void SetBeforeAssign(std::function<void()> f) { before_assign_ = std::move(f); }
  // The partitions the group handed this consumer at its last assignment
  // (0 once they are taken away), and how many its topics have (from the
  // broker's metadata). Fewer than all: another member is in the group.
  // Call on the thread in Poll (the before-assign callback).
  Status Coverage(int* assigned, int* total, std::chrono::milliseconds timeout) const;
  // Per assigned partition: its high watermark as last fetched minus this
  // consumer's position, i.e. messages not read yet (transaction markers
  // count too). Partitions read nothing from yet are left out. For
  // /metrics; callable from any thread.
  struct PartitionLag {
    std::string topic;
    int32_t partition = 0;
    int64_t lag = 0;
  };
  std::vector<PartitionLag> Lag() const;
  void Close();

 private:
  friend class Producer;
  Consumer() = default;
  friend void RunBeforeRevoke(Consumer* c);
  friend void RunBeforeAssign(Consumer* c);
  friend void SetAssigned(Consumer* c, int partitions);
  rd_kafka_s* rk_ = nullptr;
  bool closed_ = false;
  std::function<void()> before_revoke_;
  std::function<void()> before_assign_;
  std::vector<std::string> topics_;  // subscribed to
  int assigned_ = 0;                 // set by the rebalance callback
};

// Reads one partition in offset order from a given offset, committed data
// only, outside any group (no commits: the caller keeps its own position).
// For followers of the events topic (runtime/event_follower.h). One thread
// at a time.
class PartitionReader {
 public:
  static Status Open(const BusConfig& config, const std::string& topic, int32_t partition,
                     int64_t from_offset, std::unique_ptr<PartitionReader>* out);
  ~PartitionReader();
  // Calls `each` with every committed message up to the partition's end as
  // it stands when this is called (its last stable offset), in order, then
  // returns. A non-ok status from `each` stops the read and is returned; the
  // message that failed is read again by the next call. E_KAFKA at
  // `timeout`; E_OFFSET_LOST when the next offset is no longer held by the
  // broker (retention dropped it): the caller's copy can no longer be
  // complete, and nothing is skipped silently.
  Status ReadToEnd(std::chrono::milliseconds timeout, const std::function<Status(const Message&)>& each);
  // The next offset to read.
  int64_t position() const { return next_; }

  // Reads from `offset` next.
  Status Seek(int64_t offset);

 private:
  PartitionReader() = default;
  rd_kafka_s* rk_ = nullptr;
  std::string topic_;
  int32_t partition_ = 0;
  int64_t next_ = 0;
};

// The committed offsets (next offset to read) of consumer group `group` for
// every partition of `topics`; partitions with none committed are left out.
// Asks the group's coordinator without joining the group.
Status ReadGroupOffsets(const BusConfig& config, const std::string& group,
                        const std::vector<std::string>& topics, std::chrono::milliseconds timeout,
                        std::map<std::pair<std::string, int32_t>, int64_t>* out);

// What ReadCommittedTail read.
struct TailReadStats {
  size_t partitions = 0;  // partitions that held data
  uint64_t messages = 0;
  bool complete = false;  // every partition read to its end before the deadline
};

// Reads the committed messages (read_committed, outside any group) among the
// last `max_per_partition` offsets of every partition of `topics`, as they
// stand when it is called, and calls `each` with each one, in offset order
// within a partition. Returns once every partition is read to the end it had
// at the call, or at `timeout` with stats->complete false (a partition held
// up by an open transaction, a broker down): the caller decides what an
// incomplete read means for it. Errors: the topics' metadata or offsets
// cannot be read.
Status ReadCommittedTail(const BusConfig& config, const std::vector<std::string>& topics,
                         int64_t max_per_partition, std::chrono::milliseconds timeout,
                         const std::function<void(const Message&)>& each, TailReadStats* stats);

namespace errc {
inline constexpr const char* kKafka = "E_KAFKA";
inline constexpr const char* kTxnAbortable = "E_TXN_ABORTABLE";
inline constexpr const char* kOffsetLost = "E_OFFSET_LOST";
}  // namespace errc

}  // namespace tollgate
