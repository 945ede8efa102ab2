// get_audit_log's reader over a local log (core/audit_reader.h's
// interface): GetAuditLog on the store, always as a tenant of the calling
// agent's org, whatever org the query names. The parameters are read by
// AuditQueryFromParams (audit/query_params.h); records come back as the
// log's own JSON lines. Thread-safe, as GetAuditLog is.
#pragma once

#include "audit/log_store.h"
#include "core/audit_reader.h"

namespace tollgate {

class LogAuditReader : public AuditReader {
 public:
  explicit LogAuditReader(const LogStore& store) : store_(store) {}
  Status Query(const std::string& org_id, const Json& query, Json* page) override;

 private:
  const LogStore& store_;
};

}  // namespace tollgate
