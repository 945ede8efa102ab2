// The compliance report (docs/compliance_report.md): one row per call, folded
// from the log's events about its request — what was asked, what decide
// decided (the invocation after alias expansion), who approved it and how
// long each waited, what came of it and what it cost, and the seqs of the
// events the row was made from, so a row can carry their inclusion proofs.
//
// FoldReport is pure (a function of events, testable without a log);
// ReadReport finds the events of the calls a filter can match in a store
// and folds them. The writers render rows for a terminal, as CSV (RFC 4180,
// with spreadsheet formulas neutralised: agent-supplied text is hostile) and
// as JSON lines.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "audit/audit_query.h"
#include "audit/log_store.h"
#include "core/canonical_json.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate {

// More calls than this in one report is E_INVALID_QUERY: narrow the filter.
inline constexpr size_t kMaxReportRows = 100000;

struct ReportFilter {
  std::string org_id, agent_id, session_id;
  // A call matches when this is the tool it asked for (an alias's own name,
  // e.g. create_ticket), the other spelling it was sent as
  // (request.received's tool_called), or the tool decide resolved it to
  // (http_request for every http_request alias).
  std::string tool;
  std::string verdict;              // allow | deny | ask
  std::optional<int64_t> since_us;  // the call's time, inclusive
  std::optional<int64_t> until_us;  // exclusive
};

// get_audit_log's parameters (audit/query_params.h: org_id, agent_id,
// session_id, tool, verdict, since, until; others ignored) as a filter.
// E_INVALID_QUERY naming a malformed one.
Status ReportFilterFromParams(const Json& params, ReportFilter* filter);

// One approver's answer (approval.granted or approval.denied).
struct ReportApproval {
  std::string approver;
  std::string decision;  // granted | denied
  std::string scope;     // once | always
  std::string comment;
  int64_t time_us = 0;
  // From approval.requested to this answer; unset without a request.
  std::optional<int64_t> wait_us;
  uint64_t seq = 0;
};

struct ReportRow {
  int64_t time_us = 0;  // request.received (else the refusal)
  std::string org_id, agent_id, session_id, request_id;
  std::string tool;          // as the request names it (an alias's own name)
  std::string tool_called;   // the spelling the agent sent, when another
  std::string decided_tool;  // http_request for an alias; else `tool`
  std::string invocation;    // decision.made's, e.g. "http_request:POST https://..."
  std::string verdict, rule, reason, policy_version, danger_level;
  std::vector<ReportApproval> approvals;
  // completed | failed | rejected | denied | expired | pending (not finished:
  // waiting for approvers, or running).
  std::string outcome;
  std::string error_code;              // of a call that did not complete
  std::optional<double> reserved_usd;  // decision.made's budget reservation
  std::optional<double> cost_usd;      // execution.completed's actual cost
  std::optional<double> duration_ms;   // execution.completed's
  std::vector<uint64_t> seqs;          // every event of the request, ascending
};

// The rows of the requests `events` are about (any order, any mix of
// requests and orgs), each request's events folded, those `filter` matches
// kept, in time order (then request). Events without a request_id are
// ignored, and so is a request with neither request.received nor a
// refusal that ended it.
std::vector<ReportRow> FoldReport(const std::vector<Event>& events, const ReportFilter& filter);
bool RowMatches(const ReportRow& row, const ReportFilter& filter);

// The rows of every call `filter` matches in `store`, as `scope` may read
// them: a tenant reads its own org (naming another is E_FORBIDDEN).
Status ReadReport(const LogStore& store, const QueryScope& scope, const ReportFilter& filter,
                  std::vector<ReportRow>* rows);

// --- Writers ---

// A row's inclusion proofs, one JSON object per seq of the row:
// {"seq": N, "proof": "<tlog-proof>"} or {"seq": N, "proof_pending": true}.
using RowProofs = std::vector<Json>;

// The CSV and table columns, in order ("proofs" last, only with proofs).
std::vector<std::string> ReportColumns(bool proofs);
// One row's cells under ReportColumns (approvers one per line: "NAME
// granted|denied after Ws [scope]: comment", control characters of a
// comment turned to spaces so that it cannot fake another line).
std::vector<std::string> ReportCells(const ReportRow& row, const RowProofs* proofs);
Json ReportRowJson(const ReportRow& row, const RowProofs* proofs);

// A CSV field: quoted when it holds a comma, a quote, CR or LF (quotes
// doubled); one that starts with = + - @ TAB or CR gets a leading
// apostrophe first, so that a spreadsheet shows it as text.
std::string CsvField(const std::string& value);

// `proofs` is null, or holds one entry per row.
void WriteReportCsv(const std::vector<ReportRow>& rows, const std::vector<RowProofs>* proofs,
                    std::ostream& out);
void WriteReportJsonLines(const std::vector<ReportRow>& rows, const std::vector<RowProofs>* proofs,
                          std::ostream& out);
// Aligned columns for a person: a subset of the columns, each cell cut to
// its column width ("~" marks a cut), every byte outside printable ASCII
// shown as "?" (no escape sequence or look-alike reaches the terminal).
void WriteReportTable(const std::vector<ReportRow>& rows, std::ostream& out);

// "csv", "jsonl" or "table": the writer of that name; false for another.
bool WriteReport(const std::string& format, const std::vector<ReportRow>& rows,
                 const std::vector<RowProofs>* proofs, std::ostream& out);

}  // namespace tollgate
