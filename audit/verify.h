// Verification of an event log or of an export of one.
//
// VerifyLog checks, over the whole database: seqs are dense from 1; every
// record decodes, its body is canonical and a valid envelope, its prev_hash
// is the previous record's hash and its hash is SHA-256(prev_hash || body);
// meta's head equals the last record; every index and dedupe entry the
// events imply exists, and no other entry does; the Merkle tree, when the
// log has one, holds no more leaves than records and every node the records'
// hashes imply, and nothing else. VerifyExport checks an
// export stream (audit/export.h) the same way, offline, with no database.
//
// Both report every problem found (up to a cap) and the first bad seq. They
// read only; run them on a LogStore in any mode (a secondary sees the log as
// of its last CatchUp).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "audit/log_store.h"
#include "core/status.h"

namespace tollgate {

struct VerifyProblem {
  uint64_t seq = 0;  // 0 when the problem has no seq (e.g. a malformed header)
  Status status;     // E_CHAIN_BROKEN, E_INDEX_MISMATCH, E_LOG_CORRUPT, E_EXPORT_INVALID
};

struct VerifyReport {
  uint64_t events = 0;         // records checked
  uint64_t index_entries = 0;  // index and dedupe entries checked
  uint64_t merkle_leaves = 0;  // VerifyLog: leaves of the stored Merkle tree, each checked
  // The range checked: seqs from_seq..head_seq, the first linking to
  // from_prev_hash (the genesis hash for a whole log). An export that
  // starts past seq 1 proves only that its records chain from
  // from_prev_hash, not that nothing came before: Summary() says so.
  uint64_t from_seq = 0;
  std::string from_prev_hash;  // hex
  uint64_t head_seq = 0;
  std::string head_hash;                // hex
  std::vector<VerifyProblem> problems;  // sorted by seq; at most kMaxProblems
  bool truncated_problems = false;
  // A selection export (version 2, audit/export.h): records of a filter,
  // not a contiguous range. Each record is checked against its own hash;
  // only consecutive seqs can be checked as links (`linked` pairs).
  bool selection = false;
  uint64_t linked = 0;
  uint64_t source_head_seq = 0;  // the log's head when it was exported
  std::string source_head_hash;

  bool ok() const { return problems.empty(); }
  // The smallest seq of any problem (0 if none carries one).
  uint64_t first_bad_seq() const;
  // "OK: seqs A..B (N events), ..." or "FAILED: ..."; names the range
  // verified either way, and a range that does not start at seq 1.
  std::string Summary() const;
};

inline constexpr size_t kMaxProblems = 100;

// I/O errors reading the store are reported as problems, never thrown.
VerifyReport VerifyLog(const LogStore& store);
VerifyReport VerifyExport(std::istream& in);

}  // namespace tollgate
