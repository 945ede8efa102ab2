// get_audit_log's reader over a local log (core/audit_reader.h's
// interface): GetAuditLog on the store, always as a tenant of the calling
// agent's org, whatever org the query names. The parameters are read by
// AuditQueryFromParams (audit/query_params.h); records come back as the
// log's own JSON lines. With the log's Merkle tree, its answers carry
// proofs on request (audit/audit_proofs.h, as GET /v1/audit?proofs=1's).
// Thread-safe, as GetAuditLog is.
#pragma once

#include <string>
#include <vector>

#include "audit/log_store.h"
#include "audit/merkle_store.h"
#include "core/audit_reader.h"

namespace tollgate {

class LogAuditReader : public AuditReader {
 public:
  // `store` and `tree` (null: no proofs) outlive this.
  explicit LogAuditReader(const LogStore& store, const MerkleStore* tree = nullptr)
      : store_(store), tree_(tree) {}
  Status Query(const std::string& org_id, const Json& query, Json* page) override;
  Status QueryWithProofs(const std::string& org_id, const Json& query, Json* page) override;

 private:
  // The query's records as JSON lines, and the next cursor.
  Status Lines(const std::string& org_id, const Json& q, std::vector<std::string>* lines,
               std::string* next_cursor);

  const LogStore& store_;
  const MerkleStore* tree_;
};

}  // namespace tollgate
