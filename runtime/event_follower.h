// EventFollower: keeps a local RocksDB log an exact copy of the events
// topic, the distributed deployment's record (docs/deployments.md).
//
// The events topic has one partition: one total order, so every copy (each
// log keeper's, each stage's state store) appends the same events in the
// same order and holds them under the same seqs and hashes. An event read
// twice (a stage re-made it after a crash) is a no-op: the log de-duplicates
// by event id, and the first copy in the topic is the one kept everywhere.
//
// Appends go through `sink` (the process's LogSink), so its listeners (the
// stage's state folds) and request cache see every followed event. The next
// offset to read is kept in `offset_path` after each append; it can only lag
// the log (it is written after the log's group commit), and a lagging offset
// re-reads events the log already holds.
//
// Not silent about loss or forgery: a message that is not a sealed event
// (EventsKey; someone else wrote to the topic) is not appended; in its place
// every copy appends the same request.rejected (org "unknown", code
// E_EVENT_REFUSED, its topic coordinates; core/unproven.h), so the copies
// stay identical and the record shows the attempt. Junk is not logged one
// by one past kRefusalsLoggedPerBlock per kRefusalBlockOffsets offsets: the
// rest is counted into one summary (data.summary), appended before the
// next event or when the block ends. Offsets alone settle it, so every copy
// makes the same summaries at the same place; the offset file never points
// inside a block that had a refusal (a restarted copy reads it again from
// its start, re-read events being no-ops). An offset the broker no longer holds is
// an error (E_OFFSET_LOST) that stops the follower, since the copy can no
// longer be complete.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/stage.h"
#include "core/unproven.h"
#include "runtime/kafka_bus.h"

namespace tollgate {

// The deployment's key for the events topic: every message a tollgate
// process writes there carries HMAC-SHA256(key, value) in the header
// kHeaderEventsMac, and followers refuse any message without a valid one.
// The events topic is the record in the distributed deployment, so a
// client that can write to it must not be able to add to it (a forged
// credential.added would let it act as any agent). The key is 32 random
// bytes in a 0600 file shared by the deployment's processes.
class EventsKey {
 public:
  // Reads `path`; with `create`, makes it (0600) when missing.
  static Status Load(const std::string& path, bool create, std::shared_ptr<const EventsKey>* out);
  void Seal(Message* m) const;
  bool Verify(const Message& m) const;
  // 32 bytes derived from the key for one purpose (HMAC-SHA256 of
  // "tollgate/derive/" + label): the gate's result key (deploy/gate_key.h),
  // so every process given the deployment key signs results alike.
  std::string Derive(const std::string& label) const;

 private:
  std::string key_;
};

inline constexpr const char* kHeaderEventsMac = "tollgate-events-mac";

// Refused messages of the events topic: per block of this many offsets,
// the first kRefusalsLoggedPerBlock are logged one by one, the rest counted.
inline constexpr int64_t kRefusalBlockOffsets = 1024;
inline constexpr size_t kRefusalsLoggedPerBlock = 10;

struct FollowerOptions {
  BusConfig bus;            // bus.topics.events() is followed
  std::string offset_path;  // "" = always start from offset 0
  std::chrono::milliseconds timeout{10000};
  size_t max_event_bytes = kDefaultMaxEventBytes;
  std::shared_ptr<const EventsKey> key;  // required: messages it does not seal are refused
};

struct FollowerStats {
  std::atomic<uint64_t> appended{0};    // new events in the local log
  std::atomic<uint64_t> duplicates{0};  // already there
  std::atomic<uint64_t> foreign{0};     // messages refused: not sealed events
};

class EventFollower {
 public:
  // `sink` appends to the local log (de-duplicating by event id, one group
  // commit per call); `log_empty`: it holds nothing yet (start from offset 0
  // whatever the offset file says).
  static Status Open(FollowerOptions options, bool log_empty, EventSink& sink,
                     std::unique_ptr<EventFollower>* out);
  // Appends every event committed on the topic up to now (its last stable
  // offset when called). Thread-safe; concurrent callers wait for each other.
  Status CatchUp();
  int64_t position() const;
  const FollowerStats& stats() const { return stats_; }

 private:
  EventFollower() = default;
  Status SaveOffset();

  FollowerOptions options_;
  EventSink* sink_ = nullptr;
  mutable std::mutex mu_;
  std::unique_ptr<PartitionReader> reader_;  // guarded by mu_
  int64_t saved_ = -1;                       // guarded by mu_
  // The refusals of the block of offsets being read (guarded by mu_).
  struct RefusalBlock {
    int64_t block = -1;    // offset / kRefusalBlockOffsets
    bool refused = false;  // a message of it was refused
    size_t logged = 0;     // refusals logged one by one
    RefusalCount pending;  // refusals counted, not summarized yet
  };
  RefusalBlock block_;
  FollowerStats stats_;
};

// An EventSink over the events topic, for writers outside a stage runner
// (identity set-up, the HTTP API's credential changes): AppendAll commits
// the events in a transaction of their own, then has the follower append
// them to the local log and reports the seqs they got there, so a caller
// sees its events applied (listeners run) before it returns.
class TopicEventSink : public EventSink {
 public:
  // The seq the local log holds event `id` under (E_NOT_FOUND if none).
  using SeqOfEvent = std::function<Status(const std::string& id, uint64_t* seq)>;
  static Status Open(const BusConfig& bus, const std::string& transactional_id, EventFollower& follower,
                     SeqOfEvent seq_of, std::shared_ptr<const EventsKey> key,
                     std::unique_ptr<TopicEventSink>* out);
  void AppendAll(std::vector<Event> events, std::vector<Appended>* results) override;

 private:
  TopicEventSink(BusConfig bus, EventFollower& follower, SeqOfEvent seq_of)
      : bus_(std::move(bus)), follower_(follower), seq_of_(std::move(seq_of)) {}
  BusConfig bus_;
  std::shared_ptr<const EventsKey> key_;
  std::string transactional_id_;
  EventFollower& follower_;
  SeqOfEvent seq_of_;
  std::mutex mu_;
  std::unique_ptr<Producer> producer_;  // guarded by mu_
};

// The events topic's message for `e` (key org/agent, header its id), sealed
// with `key`, as a stage runner produces it in its transaction.
Status EventMessage(const Event& e, const std::string& topic, size_t max_event_bytes, const EventsKey& key,
                    Message* out);

}  // namespace tollgate
