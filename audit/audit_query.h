// get_audit_log: filtered, paginated reads of the event log.
//
// A query names any of: org, agent, session, request, tool, event types,
// verdict (of decision.made events), a time range [since, until). The reader
// walks the most selective index available, in this fixed order of
// preference: request > session > agent > (time, when both bounds are given)
// > tool > type (a single type) > org > (time, one bound) > every event by
// seq; every other filter is applied to the events read. Results come in seq
// order (time order when the time index is walked), ascending by default.
//
// Pagination: a page holds at most `limit` events (default 100, at most
// 1000) and next_cursor, which continues the same query after the last
// event returned; an empty next_cursor means the range is exhausted. A page
// also stops after reading kMaxScanPerPage events, so a query whose filters
// match little cannot pin a reader; it then returns what it found with a
// cursor to go on from.
//
// Tenancy: a caller scoped to one org must name that org; naming another is
// E_FORBIDDEN. Thread-safe for concurrent queries on one store.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "audit/log_store.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate {

inline constexpr size_t kDefaultQueryLimit = 100;
inline constexpr size_t kMaxQueryLimit = 1000;
inline constexpr uint64_t kMaxScanPerPage = 100000;

struct AuditQuery {
  std::string org_id;
  std::string agent_id;
  std::string session_id;
  std::string request_id;
  std::string tool;
  std::vector<std::string> types;   // any of these; empty = all
  std::string verdict;              // allow | deny | ask; implies decision.made
  std::optional<int64_t> since_us;  // inclusive
  std::optional<int64_t> until_us;  // exclusive
  std::string cursor;               // from a previous page
  size_t limit = 0;                 // 0 = kDefaultQueryLimit
  bool descending = false;
  // Fill AuditPage::lines (each record's canonical JSON, exactly what
  // CanonicalBytes(event.RecordJson()) gives) instead of AuditPage::events.
  // For callers that hand records on as JSON (CLI, HTTP, the tool): no JSON
  // tree is built for an event whose envelope settles the filters.
  bool json_lines = false;
};

// Who is asking: one org (tenant-scoped, e.g. an auditor or an agent) or
// every org (an operator on the machine that holds the log).
struct QueryScope {
  std::string org_id;
  bool all_orgs = false;
  static QueryScope Operator() { return QueryScope{"", true}; }
  static QueryScope Tenant(std::string org) { return QueryScope{std::move(org), false}; }
};

struct AuditPage {
  std::vector<Event> events;       // unless json_lines
  std::vector<std::string> lines;  // when json_lines
  std::string next_cursor;         // empty when there is nothing more
  std::string index_used;          // e.g. "idx_session", "events"
  uint64_t scanned = 0;            // index entries examined
};

Status GetAuditLog(const LogStore& store, const QueryScope& scope, const AuditQuery& query, AuditPage* page);

// Every event `query` matches (any org: the operator's scope), page after
// page of kMaxQueryLimit, in the query's order: for the folds that read one
// slice of the log (a request's events, approvals, agent rules).
Status ForEachEvent(const LogStore& store, AuditQuery query, const std::function<void(Event&)>& visit);

}  // namespace tollgate
