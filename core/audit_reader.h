// AuditReader: how get_audit_log reads the log without execute depending on
// RocksDB. The embedded wiring (deploy/pipeline.cpp) implements it with
// audit/audit_query.h's GetAuditLog; tests use a fake.
#pragma once

#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

// Proofs were asked of a reader that keeps no Merkle tree (docs/errors.md).
inline constexpr const char* kNoProofsCode = "E_NOT_CONFIGURED";

class AuditReader {
 public:
  virtual ~AuditReader() = default;
  // `query` holds the filters of audit/audit_query.h's AuditQuery as JSON
  // (org_id, agent_id, session_id, request_id, tool, types, verdict, since,
  // until as RFC 3339, cursor, limit, descending). The caller is scoped to
  // `org_id`: an implementation must run the query as that tenant (never as
  // an operator). Fills *page with {"events": [record JSON...],
  // "next_cursor": "..."}. Thread-safe.
  virtual Status Query(const std::string& org_id, const Json& query, Json* page) = 0;
  // Query, each record also carrying its inclusion proof against the latest
  // signed checkpoint (audit/audit_proofs.h: "proof", a C2SP tlog-proof, or
  // "proof_pending": true when that checkpoint does not cover it yet), and
  // the page "checkpoint": that checkpoint's signed note ("" before the
  // first). kNoProofsCode where no tree is kept (this default).
  virtual Status QueryWithProofs(const std::string& /*org_id*/, const Json& /*query*/, Json* /*page*/) {
    return Status::Error(kNoProofsCode,
                         "this deployment keeps no Merkle tree here: it has no proofs to give");
  }
};

}  // namespace tollgate
