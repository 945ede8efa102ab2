// EventLog: how it refuses appends and recovers (audit/event_log.h, "Fail
// closed, then recover by itself"; docs/operations.md, "A full disk").
#include <algorithm>
#include <chrono>

#include "audit/event_log.h"
#include "core/log.h"

namespace tollgate {

using namespace logfmt;

namespace {

// Recovery tries: the first soon after a failure, then doubling to the cap.
constexpr std::chrono::milliseconds kFirstRecovery{50};
constexpr std::chrono::milliseconds kMaxRecovery{2000};

std::string Mib(uint64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

Status NoRoom(const std::string& path, uint64_t free, uint64_t keep) {
  return Status::Error(errc::kLogFull, "the disk holding " + path + " has " + Mib(free) +
                                           " free, and the log keeps " + Mib(keep));
}

// What an append gets while the log refuses for `why`.
Status Refusing(const Status& why, bool resumable) {
  const char* then = !resumable ? "; it refuses appends until it is reopened"
                     : why.code() == errc::kLogFull
                         ? "; appends resume by themselves once the disk has room"
                         : "; appends resume by themselves once writes succeed again";
  return Status::Error(why.code(), "the event log refuses appends: " + why.message() + then);
}

}  // namespace

// Hears RocksDB's background errors (a failed WAL write or sync, flush or
// compaction) and turns off RocksDB's own recovery from them, which waits for
// 64 MiB free and polls every 5 s: the log resumes by itself (TryRecover).
// RocksDB calls these without its mutex held.
class EventLog::Listener : public rocksdb::EventListener {
 public:
  explicit Listener(EventLog* log) : log_(log) {}
  void OnBackgroundError(rocksdb::BackgroundErrorReason, rocksdb::Status* bg_error) override {
    if (bg_error != nullptr && !bg_error->ok()) log_->HeardRocksError(*bg_error);
  }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status, bool* auto_recovery) override {
    if (auto_recovery != nullptr) *auto_recovery = false;
  }

 private:
  EventLog* log_;
};

std::shared_ptr<rocksdb::EventListener> EventLog::NewListener(EventLog* log) {
  return std::make_shared<Listener>(log);
}

Status EventLog::refusal() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_;
  }
  return Room();
}

Status EventLog::last_error() const {
  Status now = refusal();
  if (!now.ok()) return now;
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

Status EventLog::Room() const {
  Status room = RoomFor(0);
  return room.ok() ? room : Refusing(room, true);
}

void EventLog::RefuseLocked(const Status& why, bool resumable, bool resume_rocks) {
  const bool was_refusing = !failed_.ok();
  if (was_refusing && !resumable_) return;  // until reopened: nothing changes that
  if (!was_refusing || !resumable || why.code() != failed_.code()) {
    failed_ = last_error_ = Refusing(why, resumable);
  }
  resumable_ = resumable;
  resume_rocks_ = resume_rocks_ || resume_rocks;
  if (!recover_pending_ && resumable_) {
    recover_pending_ = true;
    recovery_backoff_ = kFirstRecovery;
    next_recovery_ = std::chrono::steady_clock::now() + kFirstRecovery;
  }
  if (!resumable_) recover_pending_ = false;
  if (!was_refusing) log::Error({"log"}) << failed_.message();
  cv_.notify_one();  // the writer waits for the next try
}

void EventLog::HeardRocksError(const rocksdb::Status& s) {
  using Sev = rocksdb::Status::Severity;
  if (s.severity() == Sev::kNoError) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++rocks_errors_;
  if (s.severity() >= Sev::kHardError) {
    RefuseLocked(FromRocks(s, "RocksDB stopped writing"), s.severity() < Sev::kFatalError, true);
  } else if (!recover_pending_) {
    // A soft error (a compaction without room) refuses nothing, but with
    // RocksDB's recovery off its background work waits for a resume.
    resume_rocks_ = true;
    recover_pending_ = true;
    next_recovery_ = std::chrono::steady_clock::now() + kMaxRecovery;
    cv_.notify_one();
  }
}

Status EventLog::RoomFor(uint64_t bytes) const {
  const uint64_t keep = options_.min_free_bytes;
  if (keep == 0) return Status::Ok();
  const uint64_t free = store_->FreeBytes();
  return free >= keep && free - keep >= bytes ? Status::Ok() : NoRoom(store_->path(), free, keep);
}

void EventLog::PinMemtable() {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  // Best effort: without it a rare second failure leaves the log refusing
  // until reopened, never worse.
  (void)store_->db()->Put(wo, store_->cf(kDefault), "memtable-pin", "");
}

void EventLog::TryRecover() {
  bool resume_rocks;
  uint64_t heard;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!recover_pending_) return;
    resume_rocks = resume_rocks_;
    heard = rocks_errors_;
  }
  // A resume flushes every memtable: only with room for it (a flush that
  // fails inside the resume can leave RocksDB beyond resuming).
  Status still;
  bool for_good = false;  // the log cannot recover without a reopen
  const uint64_t need = std::max<uint64_t>(options_.min_free_bytes, uint64_t{1} << 20);
  const uint64_t free = store_->FreeBytes();
  if (free < need) {
    still = NoRoom(store_->path(), free, need);
  } else if (resume_rocks) {
    rocksdb::DB* db = store_->db();
    rocksdb::Status r = db->Resume();
    if (r.ok()) {
      // Also after a failed sync, which RocksDB may not count as stopping
      // it: the memtables, written but maybe not in a synced WAL, go to
      // synced files, and a fresh WAL follows.
      rocksdb::FlushOptions fo;
      fo.allow_write_stall = true;
      std::vector<rocksdb::ColumnFamilyHandle*> all;
      for (int i = 0; i < logfmt::kNumCfs; ++i) all.push_back(store_->cf(i));
      r = db->Flush(fo, all);
    }
    // Writing again is safe only on a fresh WAL (PinMemtable makes RocksDB
    // switch): its next write to a WAL that failed would abort.
    if (r.ok() && !store_->wal_gate()->Recovered()) {
      r = rocksdb::Status::Aborted("RocksDB kept the WAL whose write failed");
      for_good = true;
    }
    if (r.ok()) PinMemtable();
    still = FromRocks(r, "RocksDB did not resume");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (for_good) {
    failed_ = last_error_ = Refusing(still, false);
    resumable_ = recover_pending_ = false;
    log::Error({"log"}) << failed_.message();
    return;
  }
  if (!still.ok() || rocks_errors_ != heard) {
    // Room is cheap to look at again; a failed resume backs off.
    recovery_backoff_ =
        free < need ? std::chrono::milliseconds(100) : std::min(recovery_backoff_ * 2, kMaxRecovery);
    next_recovery_ = std::chrono::steady_clock::now() + recovery_backoff_;
    return;
  }
  if (resume_rocks && written_seq_ > head_seq_) {
    // Written before a sync failed, durable since the flush above.
    head_seq_ = written_seq_;
    head_hash_ = written_hash_;
  }
  if (!failed_.ok()) {
    log::Info({"log"}) << "the event log takes appends again (" << refused_.load()
                       << " refused since it opened)";
  }
  failed_ = Status::Ok();
  resumable_ = resume_rocks_ = recover_pending_ = false;
}

}  // namespace tollgate
