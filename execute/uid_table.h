// UidTable: the uids sandboxed programs run under as root, one per identity
// (a workspace path), recorded rather than hashed so that no two identities
// ever share one (and with it RLIMIT_NPROC and file ownership). See
// docs/sandbox.md "Namespaces, user, limits".
//
// The table is an append-only text file, one "<uid> <key>\n" line per
// identity (key bytes '\\' and '\n' escaped). Every allocation happens under
// an flock on the file, re-reads what other processes appended, and
// appends and fsyncs its line before the uid is handed out, so processes
// sharing the file (several execute processes on one machine) never give
// one uid twice, and an identity keeps its uid across restarts. A new
// identity gets the lowest uid above every recorded one (uids are never
// reused) that no passwd entry names. Entries are never removed: the range
// bounds the table, and a full one fails closed. A line torn by a crash
// mid-append is dropped (its uid was never handed out); any other line that
// does not parse fails closed (we could not know which uids are taken).
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/status.h"

namespace tollgate {

class UidTable {
 public:
  // Opens (creating it and its directory, mode 0700/0600) the table at
  // `path`, handing out uids in [base, base + range).
  static Status Open(const std::string& path, uid_t base, uid_t range, std::unique_ptr<UidTable>* out);
  ~UidTable();
  UidTable(const UidTable&) = delete;
  UidTable& operator=(const UidTable&) = delete;

  // The uid of `key`, allocated and recorded on first use.
  // E_SANDBOX_UNAVAILABLE when the table cannot be read or written, is
  // corrupt, or is full.
  Status Get(const std::string& key, uid_t* uid);

  const std::string& path() const { return path_; }

 private:
  UidTable(std::string path, uid_t base, uid_t range, int fd);
  // Reads lines appended since the last call; under the flock.
  Status CatchUp();

  const std::string path_;
  const uid_t base_, range_;
  const int fd_;
  std::mutex mu_;
  std::unordered_map<std::string, uid_t> uids_;
  uid_t next_ = 0;     // lowest uid above every recorded one
  off_t read_to_ = 0;  // bytes of the file already in uids_
};

}  // namespace tollgate
