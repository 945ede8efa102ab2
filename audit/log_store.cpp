#include "audit/log_store.h"

#include <fcntl.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/log.h"

namespace tollgate {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  const char* code = s.IsNoSpace() ? errc::kLogFull : s.IsCorruption() ? errc::kLogCorrupt : errc::kLogIO;
  return Status::Error(code, what + ": " + s.ToString());
}

namespace {

// RocksDB's info log as our log lines (see the header): one line per call,
// cut at 1 KiB, warnings and errors only.
class StderrLogger : public rocksdb::Logger {
 public:
  StderrLogger() : Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  void Logv(const char* format, va_list ap) override { Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap); }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) return;
    char buf[1024];
    const int n = std::vsnprintf(buf, sizeof buf, format, ap);
    if (n <= 0) return;
    std::string line(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
    while (!line.empty() && line.back() == '\n') line.pop_back();
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      log::Error({"rocksdb"}) << line;
    } else {
      log::Warn({"rocksdb"}) << line;
    }
  }
};

// The key minus its last `n` bytes: keys of the log's CFs end in a seq (and
// the time index in time+seq), so within a prefix new keys arrive in order.
class DropSuffixTransform : public rocksdb::SliceTransform {
 public:
  explicit DropSuffixTransform(size_t n) : n_(n), name_("tollgate.DropSuffix" + std::to_string(n)) {}
  const char* Name() const override { return name_.c_str(); }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), key.size() - n_);
  }
  bool InDomain(const rocksdb::Slice& key) const override { return key.size() >= n_; }

 private:
  size_t n_;
  std::string name_;
};

std::vector<rocksdb::ColumnFamilyDescriptor> Descriptors() {
  // Appends are in seq order, so each memtable insert lands right after the
  // previous key of its prefix; a per-prefix insert hint turns the skiplist
  // search into a near-constant step (the writer's main CPU cost). Not for
  // the request index (a prefix per request: the hints would cost memory and
  // save nothing) nor dedupe (random ids).
  static const std::shared_ptr<const rocksdb::SliceTransform> kSeqSuffix =
      std::make_shared<DropSuffixTransform>(8);
  static const std::shared_ptr<const rocksdb::SliceTransform> kTimeSeqSuffix =
      std::make_shared<DropSuffixTransform>(16);
  std::vector<rocksdb::ColumnFamilyDescriptor> out;
  for (int i = 0; i < logfmt::kNumCfs; ++i) {
    rocksdb::ColumnFamilyOptions o;
    if (i == logfmt::kByTime) {
      o.memtable_insert_with_hint_prefix_extractor = kTimeSeqSuffix;
    } else if (i != logfmt::kByRequest && i != logfmt::kDedupe && i != logfmt::kMeta) {
      o.memtable_insert_with_hint_prefix_extractor = kSeqSuffix;
    }
    if (i == logfmt::kDedupe) {
      // Every append looks its id up here; most ids are new, so a bloom
      // filter answers most lookups without touching data blocks.
      rocksdb::BlockBasedTableOptions t;
      t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
      o.memtable_whole_key_filtering = true;
      o.memtable_prefix_bloom_size_ratio = 0.05;
    }
    out.emplace_back(logfmt::CfName(i), o);
  }
  return out;
}

// Whether the database at `path` has column family `cf` (the last one).
bool HasFamily(const rocksdb::DBOptions& options, const std::string& path, int cf) {
  static_assert(logfmt::kMerkle == logfmt::kNumCfs - 1, "only the last family may be missing");
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(options, path, &names).ok()) return true;  // let Open say why
  return std::find(names.begin(), names.end(), logfmt::CfName(cf)) != names.end();
}

}  // namespace

Status LogStore::Open(const std::string& path, OpenMode mode, std::unique_ptr<LogStore>* out,
                      const std::string& secondary_path, std::shared_ptr<rocksdb::EventListener> listener) {
  std::unique_ptr<LogStore> store(new LogStore());
  store->path_ = path;
  store->mode_ = mode;
  rocksdb::DBOptions options;
  options.create_if_missing = mode == OpenMode::kPrimary;
  options.create_missing_column_families = mode == OpenMode::kPrimary;
  options.max_background_jobs = 2;
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.info_log = std::make_shared<StderrLogger>();
  if (listener) options.listeners.push_back(std::move(listener));
  // No background thread of RocksDB's own retries a failed write: the
  // listener's owner resumes (a second, automatic recovery would make its
  // DB::Resume() answer Busy).
  options.max_bgerror_resume_count = 0;
  // EventLog keeps a memtable written without the WAL (EventLog::PinMemtable);
  // that must not make closing flush every memtable.
  options.avoid_flush_during_shutdown = true;
  if (mode == OpenMode::kPrimary) {
    store->wal_gate_ = std::make_unique<WalGate>();
    options.env = store->wal_gate_->Env();
  }
  // One writer thread; insert hints (above) need non-concurrent inserts.
  options.allow_concurrent_memtable_write = false;
  auto descriptors = Descriptors();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  if (mode != OpenMode::kPrimary && !std::filesystem::exists(path + "/CURRENT")) {
    return Status::Error(errc::kNotFound, "no event log at " + path);
  }
  // A log written before the Merkle tree has no `merkle` family; only the
  // writer creates it, so a reader opens without it (cf(kMerkle) is null).
  const bool without_merkle = mode != OpenMode::kPrimary && !HasFamily(options, path, logfmt::kMerkle);
  if (without_merkle) descriptors.pop_back();
  switch (mode) {
    case OpenMode::kPrimary:
      s = rocksdb::DB::Open(options, path, descriptors, &store->handles_, &raw);
      break;
    case OpenMode::kReadOnly:
      s = rocksdb::DB::OpenForReadOnly(options, path, descriptors, &store->handles_, &raw);
      break;
    case OpenMode::kSecondary: {
      store->secondary_path_ = secondary_path;
      if (secondary_path.empty()) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "tollgate-secondary-XXXXXX").string();
        if (mkdtemp(tmpl.data()) == nullptr) {
          return Status::Error(errc::kLogIO, "cannot create a directory for the secondary instance");
        }
        store->secondary_path_ = tmpl;
        store->owns_secondary_path_ = true;
      }
      options.max_open_files = -1;  // required by secondary instances
      s = rocksdb::DB::OpenAsSecondary(options, path, store->secondary_path_, descriptors, &store->handles_,
                                       &raw);
      break;
    }
  }
  if (!s.ok()) return FromRocks(s, "cannot open the event log at " + path);
  store->db_.reset(raw);
  if (without_merkle) store->handles_.push_back(nullptr);
  if (mode == OpenMode::kPrimary) {
    store->dir_fd_ = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    std::string format;
    rocksdb::Status g = raw->Get({}, store->cf(logfmt::kMeta), logfmt::kMetaFormat, &format);
    if (g.IsNotFound()) {
      g = raw->Put(rocksdb::WriteOptions(), store->cf(logfmt::kMeta), logfmt::kMetaFormat,
                   logfmt::kFormatName);
      if (!g.ok()) return FromRocks(g, "cannot initialise the event log");
    } else if (!g.ok()) {
      return FromRocks(g, "cannot read the log format");
    } else if (format != logfmt::kFormatName) {
      return Status::Error(errc::kLogCorrupt, path + " holds format '" + format + "', expected " +
                                                  std::string(logfmt::kFormatName));
    }
  }
  *out = std::move(store);
  return Status::Ok();
}

LogStore::~LogStore() {
  if (db_) {
    for (auto* h : handles_) {
      if (h != nullptr) db_->DestroyColumnFamilyHandle(h);
    }
    handles_.clear();
    db_->Close();
    db_.reset();
  }
  if (dir_fd_ >= 0) close(dir_fd_);
  if (owns_secondary_path_) {
    std::error_code ec;
    std::filesystem::remove_all(secondary_path_, ec);
  }
}

uint64_t LogStore::FreeBytes() const {
  if (dir_fd_ >= 0) {
    struct statfs st {};  // on an open directory: under a microsecond, cheap enough per batch
    if (fstatfs(dir_fd_, &st) != 0) return UINT64_MAX;
    return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize ? st.f_frsize : st.f_bsize);
  }
  struct statvfs st {};
  if (statvfs(path_.c_str(), &st) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

uint64_t LogStore::ApproximateBytes() const {
  uint64_t total = 0;
  for (auto* h : handles_) {
    if (h == nullptr) continue;
    uint64_t v = 0;
    if (db_->GetIntProperty(h, rocksdb::DB::Properties::kTotalSstFilesSize, &v)) total += v;
    if (db_->GetIntProperty(h, rocksdb::DB::Properties::kCurSizeAllMemTables, &v)) total += v;
  }
  return total;
}

Status LogStore::CatchUp() {
  if (mode_ != OpenMode::kSecondary) return Status::Ok();
  return FromRocks(db_->TryCatchUpWithPrimary(), "secondary catch-up failed");
}

Status LogStore::ReadHead(uint64_t* seq, Digest* hash) const {
  std::string v;
  rocksdb::Status s = db_->Get({}, cf(logfmt::kMeta), logfmt::kMetaHeadSeq, &v);
  if (s.IsNotFound()) {
    *seq = 0;
    *hash = kGenesisHash;
    return Status::Ok();
  }
  if (!s.ok()) return FromRocks(s, "cannot read the head");
  if (!logfmt::DecodeSeq(v, seq)) return Status::Error(errc::kLogCorrupt, "meta head_seq is malformed");
  s = db_->Get({}, cf(logfmt::kMeta), logfmt::kMetaHeadHash, &v);
  if (!s.ok() || v.size() != 32)
    return Status::Error(errc::kLogCorrupt, "meta head_hash is missing or malformed");
  std::copy(v.begin(), v.end(), hash->begin());
  return Status::Ok();
}

Status LogStore::ReadRaw(uint64_t seq, std::string* value) const {
  rocksdb::Status s = db_->Get({}, cf(logfmt::kEvents), logfmt::EncodeSeq(seq), value);
  if (s.IsNotFound()) return Status::Error(errc::kNotFound, "no event at seq " + std::to_string(seq));
  return FromRocks(s, "cannot read seq " + std::to_string(seq));
}

Status LogStore::SeqOfEvent(const std::string& id, uint64_t* seq) const {
  std::string value;
  rocksdb::Status s = db_->Get({}, cf(logfmt::kDedupe), id, &value);
  if (s.IsNotFound()) return Status::Error(errc::kNotFound, "no event " + id);
  if (!s.ok()) return FromRocks(s, "cannot look up event " + id);
  if (!logfmt::DecodeSeq(value, seq)) return Status::Error(errc::kLogCorrupt, "bad seq for event " + id);
  return Status::Ok();
}

Status LogStore::DecodeEvent(uint64_t seq, std::string_view value, Event* out) {
  logfmt::RecordView rec;
  Status s = logfmt::DecodeRecord(value, &rec);
  if (!s.ok()) return s;
  s = EventFromText(rec.body, out);
  if (!s.ok()) {
    return Status::Error(errc::kLogCorrupt,
                         "seq " + std::to_string(seq) + " does not decode: " + s.message());
  }
  if (out->seq != seq) {
    return Status::Error(errc::kLogCorrupt, "the record at seq " + std::to_string(seq) + " says it is seq " +
                                                std::to_string(out->seq));
  }
  out->prev_hash = ToHex(rec.prev_hash);
  out->hash = ToHex(rec.hash);
  return Status::Ok();
}

Status LogStore::ReadEvent(uint64_t seq, Event* out) const {
  std::string value;
  Status s = ReadRaw(seq, &value);
  if (!s.ok()) return s;
  return DecodeEvent(seq, value, out);
}

}  // namespace tollgate
