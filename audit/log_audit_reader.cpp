#include "audit/log_audit_reader.h"

#include "audit/audit_query.h"
#include "audit/query_params.h"

namespace tollgate {

Status LogAuditReader::Query(const std::string& org_id, const Json& q, Json* page) {
  AuditQuery query;
  Status s = AuditQueryFromParams(q, &query);
  if (!s.ok()) return s;
  query.org_id = org_id;  // the caller's org, never the query's word for it
  query.json_lines = true;
  AuditPage p;
  s = GetAuditLog(store_, QueryScope::Tenant(org_id), query, &p);
  if (!s.ok()) return s;
  Json events = Json::array();
  for (const auto& line : p.lines) {
    Json e;  // lines of our own log: parse failures stay null, as before
    (void)ParseJson(line, &e);
    events.push_back(std::move(e));
  }
  *page = {{"events", std::move(events)}, {"next_cursor", p.next_cursor}};
  return Status::Ok();
}

}  // namespace tollgate
