#include "audit/log_audit_reader.h"

#include "audit/audit_proofs.h"
#include "audit/audit_query.h"
#include "audit/query_params.h"

namespace tollgate {
namespace {

Json Page(const std::vector<std::string>& lines, const std::string& next_cursor) {
  Json events = Json::array();
  for (const auto& line : lines) {
    Json e;  // lines of our own log: parse failures stay null, as before
    (void)ParseJson(line, &e);
    events.push_back(std::move(e));
  }
  return {{"events", std::move(events)}, {"next_cursor", next_cursor}};
}

}  // namespace

Status LogAuditReader::Lines(const std::string& org_id, const Json& q, std::vector<std::string>* lines,
                             std::string* next_cursor) {
  AuditQuery query;
  Status s = AuditQueryFromParams(q, &query);
  if (!s.ok()) return s;
  query.org_id = org_id;  // the caller's org, never the query's word for it
  query.json_lines = true;
  AuditPage p;
  s = GetAuditLog(store_, QueryScope::Tenant(org_id), query, &p);
  if (!s.ok()) return s;
  *lines = std::move(p.lines);
  *next_cursor = std::move(p.next_cursor);
  return Status::Ok();
}

Status LogAuditReader::Query(const std::string& org_id, const Json& q, Json* page) {
  std::vector<std::string> lines;
  std::string next;
  Status s = Lines(org_id, q, &lines, &next);
  if (s.ok()) *page = Page(lines, next);
  return s;
}

Status LogAuditReader::QueryWithProofs(const std::string& org_id, const Json& q, Json* page) {
  if (tree_ == nullptr) return AuditReader::QueryWithProofs(org_id, q, page);
  std::vector<std::string> lines;
  std::string next, checkpoint;
  Status s = Lines(org_id, q, &lines, &next);
  if (s.ok()) s = ProveAuditRecords(*tree_, &lines, &checkpoint);
  if (!s.ok()) return s;
  *page = Page(lines, next);
  (*page)["checkpoint"] = checkpoint;
  return Status::Ok();
}

}  // namespace tollgate
