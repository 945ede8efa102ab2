// Export and import of an event log as JSON lines: an auditor's copy that can
// be verified offline (VerifyExport) and loaded into a fresh log.
//
// Format (docs/log_format.md, "Export format"): a header line
//   {"tollgate_export":1,"from_seq":A,"to_seq":B,"prev_hash":"<hash before A>"}
// then one canonical JSON record per event, seqs A..B in order, each with
// seq, prev_hash and hash, then an end line
//   {"tollgate_export_end":{"count":N,"last_seq":B,"last_hash":"<hash of B>"}}
// The end line makes a cut-off export detectable. An export covers a
// contiguous seq range, because only a contiguous range can be chain-checked:
// a time range exports the smallest seq range holding every event in it.
//
// With proofs (`tollgate audit export --proofs`; `proofs` the log's Merkle
// tree): each record also carries "proof", its C2SP tlog-proof against the
// latest signed checkpoint (every proof holds that checkpoint), or
// "proof_pending": true when that checkpoint does not cover it yet
// (audit/audit_proofs.h, as GET /v1/audit?proofs=1), and stays canonical.
// Those two fields are not part of the record's hash; the chain and
// `tollgate audit verify-proof --record` check the rest.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>

#include "audit/audit_query.h"
#include "audit/event_log.h"
#include "audit/log_store.h"
#include "audit/merkle_store.h"
#include "core/status.h"

namespace tollgate {

struct ExportRange {
  std::optional<uint64_t> from_seq;  // inclusive; default 1
  std::optional<uint64_t> to_seq;    // inclusive; default head
  std::optional<int64_t> since_us;   // inclusive
  std::optional<int64_t> until_us;   // exclusive
};

struct ExportStats {
  uint64_t from_seq = 0, to_seq = 0, count = 0;
};

Status ExportLog(const LogStore& store, const ExportRange& range, std::ostream& out,
                 ExportStats* stats = nullptr, const MerkleStore* proofs = nullptr);

// A selection export: the records a get_audit_log filter matches (in seq
// order, cursor and limit ignored), for an auditor of one org, who may not
// receive another org's records lying between them. Format: a header
//   {"tollgate_export":2,"selection":{<filter>},"head_seq":H,"head_hash":"<hash of H>"}
// (the log's head once every record was read), the records, each with
// prev_hash and hash as in a range export, and the same end line.
// VerifyExport checks each record against its own hash and the links
// between consecutive seqs. More than kMaxSelectionEvents records is
// E_INVALID_QUERY (narrow the filter, or use a range export).
inline constexpr size_t kMaxSelectionEvents = 200000;
Status ExportSelection(const LogStore& store, const QueryScope& scope, AuditQuery query, std::ostream& out,
                       ExportStats* stats = nullptr, const MerkleStore* proofs = nullptr);

// Verifies the whole stream first (nothing is written if it does not verify),
// then appends its records (without any proof fields); the export must continue the log exactly (from
// seq head+1 with prev_hash = head hash), so a fresh log takes an export that
// starts at seq 1. `in` must be seekable (a file).
Status ImportLog(EventLog& log, std::istream& in, uint64_t* imported = nullptr);

}  // namespace tollgate
