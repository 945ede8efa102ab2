// StageRunner's side of "no output twice" (see stage_runner.h): connecting
// so that a previous incarnation is fenced before the read-back, reading
// back the committed outputs (at Start, at a rebalance), dropping re-made
// outputs already committed, and stamping each output with its source.
#include "core/log.h"
#include "runtime/result_publisher.h"
#include "runtime/stage_runner.h"

namespace tollgate {

Status StageRunner::Start() {
  BusConfig bus = options_.bus;
  bus.client_id = "tollgate-" + stage_.name();
  // The producer first: opening it fences a previous incarnation of this
  // stage and ends its open transaction, so what the read-back sees of it
  // is final.
  Status s = Producer::Open(bus, options_.transactional_id, &producer_);
  if (!s.ok()) return s;
  s = ReadBackCommitted(options_.republish_lookback);
  if (!s.ok()) return s;
  s = Consumer::Open(bus, options_.group, stage_.input_topics(), &consumer_);
  if (!s.ok()) return s;
  publisher_ = std::make_unique<SerialWorker>();
  // A rebalance re-assigns partitions at their committed offsets. A batch
  // still publishing has not committed them yet: wait for its transaction
  // (its outcome is collected as usual after). The offset commit after it
  // can still be refused while the group rebalances (the embedded broker
  // does), and the new assignment then reads that batch again: read back
  // what it committed, as after a failed transaction.
  consumer_->SetBeforeRevoke([this] {
    if (!publisher_) return;  // closing
    ++stats_.revoked;
    publisher_->WaitIdle();
    Status r = ReadBackCommitted(RecentLookback());
    if (!r.ok()) log::Warn({stage_.name()}) << "at rebalance: " << r.ToString() << "\n";
  });
  // The process gaining partitions needs the same knowledge: the previous
  // owner's last batch may be committed while its offsets were refused, and
  // it is read again here. The first assignment follows Start's read-back,
  // but another process may have committed since.
  consumer_->SetBeforeAssign([this] {
    if (!publisher_) return;  // closing
    ++stats_.assigned;
    Status r = ReadBackCommitted(RecentLookback());
    if (!r.ok()) log::Warn({stage_.name()}) << "at assignment: " << r.ToString() << "\n";
    if (options_.sole_member) CheckSoleMember();
  });
  return Status::Ok();
}

void StageRunner::CheckSoleMember() {
  int assigned = 0, total = 0;
  Status s = consumer_->Coverage(&assigned, &total, std::chrono::milliseconds(2000));
  if (!s.ok()) {
    log::Warn({stage_.name()}) << "cannot tell whether its group has another member: " << s.ToString()
                               << "\n";
    return;
  }
  const uint64_t foreign = assigned < total ? 1 : 0;
  if (foreign == stats_.foreign_members.exchange(foreign)) return;
  if (foreign) {
    log::Error({stage_.name()}) << "its consumer group " << options_.group
                                << " has a member that is not this process: "
                                << "it was given " << assigned << " of " << total
                                << " partitions; the rest go to whoever joined (docs/trust.md)\n";
  } else {
    log::Warn({stage_.name()}) << "its consumer group has no other member any more\n";
  }
}

Status StageRunner::ReadBackCommitted(int64_t lookback) {
  std::vector<std::string> topics(declared_outputs_.begin(), declared_outputs_.end());
  if (options_.results && declared_outputs_.count(options_.bus.topics.results())) {
    // Results go out on their orgs' topics: read those back.
    Status s = options_.results->ExistingTopics(&topics);
    if (!s.ok()) return s;
  }
  if (topics.empty() || lookback <= 0) {
    stats_.readback_complete = true;
    return Status::Ok();
  }
  // Only inputs at or past the committed offsets can be read again: what
  // the read-back keeps is the re-read window, not the whole tail.
  std::map<TopicPartition, int64_t> committed;
  Status s = ReadGroupOffsets(options_.bus, options_.group, stage_.input_topics(),
                              options_.republish_read_timeout, &committed);
  if (!s.ok()) return s;
  committed_.SetCommitted(std::move(committed));
  BusConfig bus = options_.bus;
  bus.client_id = "tollgate-" + stage_.name() + "-readback";
  TailReadStats read;
  s = ReadCommittedTail(
      bus, topics, lookback, options_.republish_read_timeout, [this](const Message& m) { committed_.Add(m); },
      &read);
  if (!s.ok()) return s;
  stats_.readback_messages = read.messages;
  stats_.readback_kept = committed_.size();
  stats_.readback_complete = read.complete;
  if (!read.complete) {
    log::Warn({stage_.name()})
        << "read back only part of its committed outputs within " << options_.republish_read_timeout.count()
        << " ms (" << read.messages
        << " messages); a message read again after the last crash may have its output sent twice\n";
  } else if (committed_.size() > 0) {
    log::Warn({stage_.name()})
        << committed_.size()
        << " committed outputs belong to messages past its committed offsets; re-made, they will not be "
           "sent twice\n";
  }
  return Status::Ok();
}

void StageRunner::StampSource(Message& out, const std::string& source) {
  out.headers[kHeaderSource] = source;
  // An output on a topic the stage did not declare is not read back after
  // a crash: say so once, it is a stage bug.
  if (!declared_outputs_.empty() && !declared_outputs_.count(out.topic) &&
      undeclared_.insert(out.topic).second) {
    log::Warn({stage_.name()})
        << "produces to " << out.topic
        << ", which it does not declare in output_topics(): outputs there may be sent twice after a crash\n";
  }
}

void StageRunner::DropCommitted(std::vector<StageOutput>& outputs) {
  if (committed_.empty()) return;
  size_t kept = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (committed_.Contains(outputs[i].message)) {
      ++stats_.already_committed;
      continue;
    }
    if (kept != i) outputs[kept] = std::move(outputs[i]);
    ++kept;
  }
  outputs.resize(kept);
}

}  // namespace tollgate
