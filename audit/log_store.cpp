#include "audit/log_store.h"

#include <rocksdb/filter_policy.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>

#include <cstdlib>
#include <filesystem>

namespace tollgate {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  const char* code = s.IsCorruption() ? errc::kLogCorrupt : errc::kLogIO;
  return Status::Error(code, what + ": " + s.ToString());
}

namespace {

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

}  // namespace

Status LogStore::Open(const std::string& path, OpenMode mode, std::unique_ptr<LogStore>* out,
                      const std::string& secondary_path) {
  std::unique_ptr<LogStore> store(new LogStore());
  store->path_ = path;
  store->mode_ = mode;
  rocksdb::DBOptions options;
  options.create_if_missing = mode == OpenMode::kPrimary;
  options.create_missing_column_families = mode == OpenMode::kPrimary;
  options.max_background_jobs = 2;
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.keep_log_file_num = 2;
  // One writer thread; insert hints (above) need non-concurrent inserts.
  options.allow_concurrent_memtable_write = false;
  auto descriptors = Descriptors();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  if (mode != OpenMode::kPrimary && !std::filesystem::exists(path + "/CURRENT")) {
    return Status::Error(errc::kNotFound, "no event log at " + path);
  }
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
  if (mode == OpenMode::kPrimary) {
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
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    handles_.clear();
    db_->Close();
    db_.reset();
  }
  if (owns_secondary_path_) {
    std::error_code ec;
    std::filesystem::remove_all(secondary_path_, ec);
  }
}

uint64_t LogStore::ApproximateBytes() const {
  uint64_t total = 0;
  for (auto* h : handles_) {
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
