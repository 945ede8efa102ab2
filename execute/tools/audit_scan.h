// Reading the log page by page for the tools that fold it (session,
// memory): through ToolContext::audit, always as the caller's org (the
// reader is tenant-scoped: another org's events never come back), newest
// first, at most `max_events` records, so a long history costs a bounded
// scan, never an unbounded one.
#pragma once

#include <algorithm>
#include <functional>

#include "execute/tool.h"

namespace tollgate {

// Calls fn(record) for each record `query` (get_audit_log's filters)
// matches, newest first, until fn returns false, the records run out or
// `max_events` were read (*capped = true). Null on success, else the
// ToolResult: E_AUDIT_ERROR (alias: the log's code; recoverable).
inline Json ScanAudit(const ToolContext& ctx, Json query, size_t max_events,
                      const std::function<bool(const Json&)>& fn, bool* capped) {
  *capped = false;
  if (ctx.audit == nullptr)
    return ToolFail(errc::kAuditError, "the audit log is not readable from this executor");
  query["descending"] = true;
  size_t read = 0;
  std::string cursor;
  while (true) {
    query["limit"] = std::min<size_t>(1000, max_events - read);
    if (!cursor.empty()) query["cursor"] = cursor;
    Json page;
    Status s = ctx.audit->Query(ctx.org_id, query, &page);
    if (!s.ok()) return ToolResultErrorAs(errc::kAuditError, s.code(), s.message(), true);
    if (!page.contains("events") || !page["events"].is_array()) return Json();
    for (const auto& e : page["events"]) {
      ++read;
      if (e.is_object() && !fn(e)) return Json();
    }
    const auto nc = page.find("next_cursor");
    cursor = nc != page.end() && nc->is_string() ? nc->get<std::string>() : "";
    if (cursor.empty() || page["events"].empty()) return Json();
    if (read >= max_events) {
      *capped = true;
      return Json();
    }
  }
}

}  // namespace tollgate
