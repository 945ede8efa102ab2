// get_audit_log's parameters: one reading of them for every shell that
// builds an AuditQuery (audit/audit_query.h) from what a caller sent — the
// get_audit_log tool (through core/audit_reader.h), the HTTP API's
// GET /v1/audit and `tollgate audit query`.
//
// Parameters are a JSON object with the tool's names (docs/tools.md); each
// may be absent:
//   org_id, agent_id, session_id, request_id, tool, verdict, cursor: strings
//   types: event types, a list of strings or one string; every string may
//          name several types separated by commas
//   since, until: RFC 3339 times ([since, until))
//   limit: a non-negative integer, or such a number in decimal as a string
//          (a query string's form); 0 = kDefaultQueryLimit
//   descending: a boolean, or a string: "1" and "true" are true, any other
//          string false (a query string's desc=1)
// Any other key is ignored. A parameter of the wrong form is
// E_INVALID_QUERY naming it; the limit's maximum is GetAuditLog's to check.
#pragma once

#include <map>
#include <string>

#include "audit/audit_query.h"
#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

// Fills *query's filters from `params` (json_lines and the caller's scope
// are the caller's to set). On error *query is left partly filled.
Status AuditQueryFromParams(const Json& params, AuditQuery* query);

// The HTTP API's query string (docs/http_api.md) as those parameters: its
// short names org, agent, session, request, type (repeatable), desc map to
// org_id, agent_id, session_id, request_id, types, descending; tool,
// verdict, since, until, cursor and limit are the same. Values stay strings
// (AuditQueryFromParams reads them); an empty value is an absent one; of a
// repeated parameter other than type, the first counts.
Json AuditParamsFromQueryString(const std::multimap<std::string, std::string>& query);

}  // namespace tollgate
