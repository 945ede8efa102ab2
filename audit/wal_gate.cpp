#include "audit/wal_gate.h"

#include <rocksdb/file_system.h>

#include <chrono>
#include <string>

namespace tollgate {

namespace {

// RocksDB names its WAL files NNNNNN.log; 0 for any other file.
uint64_t WalNumber(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".log") != 0) return 0;
  uint64_t n = 0;
  for (size_t i = 0; i + 4 < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    n = n * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return n;
}

class WalFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  WalFile(std::unique_ptr<rocksdb::FSWritableFile> f, WalGate* gate, uint64_t number)
      : FSWritableFileOwnerWrapper(std::move(f)), gate_(gate), number_(number) {}
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           rocksdb::IODebugContext* dbg) override {
    gate_->BeforeAppend(number_);
    rocksdb::IOStatus s = target()->Append(data, o, dbg);
    gate_->AfterAppend(number_, s.ok());
    return s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           const rocksdb::DataVerificationInfo& info, rocksdb::IODebugContext* dbg) override {
    gate_->BeforeAppend(number_);
    rocksdb::IOStatus s = target()->Append(data, o, info, dbg);
    gate_->AfterAppend(number_, s.ok());
    return s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    gate_->Syncing(number_);
    return target()->Sync(o, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    gate_->Syncing(number_);
    return target()->Fsync(o, dbg);
  }

 private:
  WalGate* gate_;
  uint64_t number_;
};

class WalGateFs : public rocksdb::FileSystemWrapper {
 public:
  WalGateFs(WalGate* gate) : FileSystemWrapper(rocksdb::FileSystem::Default()), gate_(gate) {}
  const char* Name() const override { return "TollgateWalGate"; }
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Wrap(f, target()->NewWritableFile(f, o, r, dbg), r);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    return Wrap(f, target()->ReuseWritableFile(f, old, o, r, dbg), r);
  }

 private:
  rocksdb::IOStatus Wrap(const std::string& f, rocksdb::IOStatus s,
                         std::unique_ptr<rocksdb::FSWritableFile>* r) {
    const uint64_t number = WalNumber(f);
    if (s.ok() && number != 0) {
      gate_->WalCreated(number);
      *r = std::make_unique<WalFile>(std::move(*r), gate_, number);
    }
    return s;
  }
  WalGate* gate_;
};

}  // namespace

WalGate::WalGate() : env_(rocksdb::NewCompositeEnv(std::make_shared<WalGateFs>(this))) {}

WalGate::~WalGate() = default;

bool WalGate::BeginSync() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !appending_ && !sync_starting_; });
  if (failed_) return false;
  sync_starting_ = true;
  return true;
}

void WalGate::SyncDone() {
  std::lock_guard<std::mutex> lock(mu_);
  sync_starting_ = false;
  cv_.notify_all();
}

bool WalGate::Recovered() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_ && newest_ <= failed_wal_) return false;
  failed_ = false;
  return true;
}

void WalGate::WalCreated(uint64_t number) {
  std::lock_guard<std::mutex> lock(mu_);
  if (number > newest_) newest_ = number;
}

void WalGate::BeforeAppend(uint64_t number) {
  std::unique_lock<std::mutex> lock(mu_);
  // Bounded, in case RocksDB ever appends while holding what its sync needs
  // (it does not today): better the old race than a hang.
  if (number >= newest_) cv_.wait_for(lock, std::chrono::seconds(1), [this] { return !sync_starting_; });
  appending_ = true;
}

void WalGate::AfterAppend(uint64_t number, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  appending_ = false;
  if (!ok) {
    failed_ = true;
    if (number > failed_wal_) failed_wal_ = number;
  }
  cv_.notify_all();
}

void WalGate::Syncing(uint64_t number) {
  std::lock_guard<std::mutex> lock(mu_);
  if (number < newest_) return;  // an older WAL first: appends go to the newest
  sync_starting_ = false;
  cv_.notify_all();
}

}  // namespace tollgate
