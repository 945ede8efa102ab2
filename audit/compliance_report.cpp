#include "audit/compliance_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "audit/query_params.h"
#include "core/request_state.h"

namespace tollgate {
namespace {

std::string Str(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

std::optional<double> Number(const Json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// The tool decide resolved the call to: an invocation names it before its
// first ':' for http_request (and so for each of its aliases); the other
// invocation prefixes (builtin:, bash:, a file tool's path form) are not
// tool names, so the tool asked for stands.
std::string DecidedTool(const std::string& tool, const std::string& invocation) {
  static const std::string kHttp = "http_request:";
  if (invocation.compare(0, kHttp.size(), kHttp) == 0) return "http_request";
  return tool;
}

// Every approver's answer, in log order, with its wait since the request.
std::vector<ReportApproval> Approvals(const std::vector<Event>& events) {
  std::optional<int64_t> asked_us;
  std::vector<ReportApproval> out;
  for (const Event& e : events) {
    if (e.type == ev::kApprovalRequested && !asked_us) asked_us = e.time_us;
    if (e.type != ev::kApprovalGranted && e.type != ev::kApprovalDenied) continue;
    ReportApproval a;
    a.approver = Str(e.data, "approver");
    a.decision = e.type == ev::kApprovalGranted ? "granted" : "denied";
    a.scope = Str(e.data, "scope");
    a.comment = Str(e.data, "comment");
    a.time_us = e.time_us;
    if (asked_us) a.wait_us = e.time_us - *asked_us;
    a.seq = e.seq;
    out.push_back(std::move(a));
  }
  return out;
}

// The outcome and error code of a request as its result would say
// (core/request_state.h's ResultFromLog), "pending" while unfinished.
void Outcome(const RequestState& st, ReportRow* row) {
  const Json result = ResultFromLog(st);
  if (result.is_null()) {
    row->outcome = "pending";
    return;
  }
  row->outcome = Str(result, "status");
  if (row->outcome != "completed") {
    const Json tr = result.value("result", Json::object());
    row->error_code = Str(tr.is_object() ? tr.value("error", Json::object()) : Json(), "code");
  }
}

// One request's events (ascending seq) as a row; false when the log shows
// no call (nothing received and no refusal that ended it).
bool FoldRequest(const std::vector<Event>& events, ReportRow* row) {
  const RequestState st = Summarize(events);
  const Event* first = st.received ? st.received : st.rejected;
  if (first == nullptr) return false;
  row->time_us = first->time_us;
  row->org_id = first->org_id;
  row->agent_id = first->agent_id;
  row->session_id = first->session_id;
  row->request_id = first->request_id;
  row->tool = first->tool;
  if (st.received) row->tool_called = Str(st.received->data, "tool_called");
  if (st.decision) {
    const Json& d = st.decision->data;
    row->invocation = Str(d, "invocation");
    row->verdict = Str(d, "verdict");
    row->rule = Str(d, "rule");
    row->reason = Str(d, "reason");
    row->policy_version = Str(d, "policy_version");
    row->danger_level = Str(d, "danger_level");
    if (d.contains("reservation")) row->reserved_usd = Number(d["reservation"], "usd");
  }
  row->decided_tool = DecidedTool(row->tool, row->invocation);
  row->approvals = Approvals(events);
  Outcome(st, row);
  if (st.completed) {
    row->cost_usd = Number(st.completed->data, "cost_usd");
    row->duration_ms = Number(st.completed->data, "duration_ms");
  }
  for (const Event& e : events) row->seqs.push_back(e.seq);
  return true;
}

}  // namespace

Status ReportFilterFromParams(const Json& params, ReportFilter* filter) {
  AuditQuery q;
  Status s = AuditQueryFromParams(params, &q);
  if (!s.ok()) return s;
  if (!q.verdict.empty() && q.verdict != "allow" && q.verdict != "deny" && q.verdict != "ask") {
    return Status::Error(errc::kInvalidQuery, "verdict must be allow, deny or ask, not '" + q.verdict + "'");
  }
  filter->org_id = q.org_id;
  filter->agent_id = q.agent_id;
  filter->session_id = q.session_id;
  filter->tool = q.tool;
  filter->verdict = q.verdict;
  filter->since_us = q.since_us;
  filter->until_us = q.until_us;
  return Status::Ok();
}

bool RowMatches(const ReportRow& row, const ReportFilter& f) {
  auto is = [](const std::string& want, const std::string& v) { return want.empty() || want == v; };
  if (!is(f.org_id, row.org_id) || !is(f.agent_id, row.agent_id) || !is(f.session_id, row.session_id) ||
      !is(f.verdict, row.verdict)) {
    return false;
  }
  if (!f.tool.empty() && f.tool != row.tool && f.tool != row.decided_tool &&
      (row.tool_called.empty() || f.tool != row.tool_called)) {
    return false;
  }
  if (f.since_us && row.time_us < *f.since_us) return false;
  if (f.until_us && row.time_us >= *f.until_us) return false;
  return true;
}

std::vector<ReportRow> FoldReport(const std::vector<Event>& events, const ReportFilter& filter) {
  // By request (request ids are per org), each request's events by seq.
  std::map<std::string, std::vector<Event>> by_request;
  for (const Event& e : events) {
    if (!e.request_id.empty()) by_request[RequestKey(e.org_id, e.request_id)].push_back(e);
  }
  std::vector<ReportRow> rows;
  for (auto& [key, evs] : by_request) {
    std::sort(evs.begin(), evs.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
    ReportRow row;
    if (FoldRequest(evs, &row) && RowMatches(row, filter)) rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const ReportRow& a, const ReportRow& b) {
    return std::tie(a.time_us, a.seqs.front()) < std::tie(b.time_us, b.seqs.front());
  });
  return rows;
}

Status ReadReport(const LogStore& store, const QueryScope& scope, const ReportFilter& filter,
                  std::vector<ReportRow>* rows) {
  ReportFilter f = filter;
  if (!scope.all_orgs) {
    if (!f.org_id.empty() && f.org_id != scope.org_id) {
      return Status::Error(errc::kForbidden,
                           "a caller of org '" + scope.org_id + "' may not read org '" + f.org_id + "'");
    }
    f.org_id = scope.org_id;
  }
  // The calls that may match: their request.received (or a refusal, for a
  // call refused before it was received) by the indexed filters. Tool and
  // verdict are the row's, known once its events are folded: an alias's
  // events name the alias, not http_request.
  AuditQuery calls;
  calls.org_id = f.org_id;
  calls.agent_id = f.agent_id;
  calls.session_id = f.session_id;
  calls.since_us = f.since_us;
  calls.until_us = f.until_us;
  calls.types = {ev::kRequestReceived, ev::kRequestRejected};
  std::vector<std::pair<std::string, std::string>> keys;  // (org, request), first seen first
  std::set<std::string> seen;
  Status s = ForEachEvent(store, calls, [&](Event& e) {
    if (!e.request_id.empty() && seen.insert(RequestKey(e.org_id, e.request_id)).second) {
      keys.emplace_back(e.org_id, e.request_id);
    }
  });
  if (!s.ok()) return s;
  if (keys.size() > kMaxReportRows) {
    return Status::Error(errc::kInvalidQuery, "more than " + std::to_string(kMaxReportRows) +
                                                  " calls match: narrow the filter (org, agent, time)");
  }
  // Each call's every event, whenever it came (a completion after `until`
  // still belongs to its call).
  std::vector<Event> events;
  for (const auto& [org, request] : keys) {
    AuditQuery one;
    one.org_id = org;
    one.request_id = request;
    s = ForEachEvent(store, one, [&](Event& e) { events.push_back(std::move(e)); });
    if (!s.ok()) return s;
  }
  *rows = FoldReport(events, f);
  return Status::Ok();
}

}  // namespace tollgate

// --- Writers ---

namespace tollgate {
namespace {

std::string NumberText(const std::optional<double>& v) { return v ? Json(*v).dump() : ""; }

// Microseconds as seconds with millisecond precision: "12.345".
std::string Seconds(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(us) / 1e6);
  return buf;
}

// Control characters as spaces: a comment cannot start a line of its own.
std::string OneLine(const std::string& v) {
  std::string out = v;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

std::string ApproversCell(const ReportRow& row) {
  std::string out;
  for (const ReportApproval& a : row.approvals) {
    if (!out.empty()) out += '\n';
    out += OneLine(a.approver) + ' ' + a.decision;
    if (a.wait_us) out += " after " + Seconds(*a.wait_us) + "s";
    if (!a.scope.empty()) out += " [" + a.scope + "]";
    if (!a.comment.empty()) out += ": " + OneLine(a.comment);
  }
  return out;
}

std::string SeqsCell(const ReportRow& row) {
  std::string out;
  for (uint64_t s : row.seqs) out += (out.empty() ? "" : " ") + std::to_string(s);
  return out;
}

Json ApprovalJson(const ReportApproval& a) {
  Json j{{"approver", a.approver}, {"decision", a.decision},        {"scope", a.scope},
         {"comment", a.comment},   {"time", FormatTime(a.time_us)}, {"seq", a.seq}};
  j["wait_s"] = a.wait_us ? Json(static_cast<double>(*a.wait_us) / 1e6) : Json(nullptr);
  return j;
}

Json OptionalNumber(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

}  // namespace

std::vector<std::string> ReportColumns(bool proofs) {
  std::vector<std::string> c{"time",           "org",        "agent",   "session",    "request_id",
                             "tool",           "invocation", "verdict", "rule",       "reason",
                             "policy_version", "approvers",  "outcome", "error_code", "reserved_usd",
                             "cost_usd",       "seqs"};
  if (proofs) c.push_back("proofs");
  return c;
}

std::vector<std::string> ReportCells(const ReportRow& row, const RowProofs* proofs) {
  std::vector<std::string> c{FormatTime(row.time_us),
                             row.org_id,
                             row.agent_id,
                             row.session_id,
                             row.request_id,
                             row.tool,
                             row.invocation,
                             row.verdict,
                             row.rule,
                             row.reason,
                             row.policy_version,
                             ApproversCell(row),
                             row.outcome,
                             row.error_code,
                             NumberText(row.reserved_usd),
                             NumberText(row.cost_usd),
                             SeqsCell(row)};
  if (proofs) c.push_back(Json(*proofs).dump());
  return c;
}

Json ReportRowJson(const ReportRow& row, const RowProofs* proofs) {
  Json approvals = Json::array();
  for (const ReportApproval& a : row.approvals) approvals.push_back(ApprovalJson(a));
  Json j{{"time", FormatTime(row.time_us)},
         {"org_id", row.org_id},
         {"agent_id", row.agent_id},
         {"session_id", row.session_id},
         {"request_id", row.request_id},
         {"tool", row.tool},
         {"decided_tool", row.decided_tool},
         {"invocation", row.invocation},
         {"verdict", row.verdict},
         {"rule", row.rule},
         {"reason", row.reason},
         {"policy_version", row.policy_version},
         {"danger_level", row.danger_level},
         {"approvals", std::move(approvals)},
         {"outcome", row.outcome},
         {"error_code", row.error_code},
         {"reserved_usd", OptionalNumber(row.reserved_usd)},
         {"cost_usd", OptionalNumber(row.cost_usd)},
         {"duration_ms", OptionalNumber(row.duration_ms)},
         {"seqs", row.seqs}};
  if (!row.tool_called.empty()) j["tool_called"] = row.tool_called;
  if (proofs) j["proofs"] = *proofs;
  return j;
}

std::string CsvField(const std::string& value) {
  std::string v = value;
  if (!v.empty() && std::string_view("=+-@\t\r").find(v[0]) != std::string_view::npos) v.insert(0, "'");
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + '"';
}

void WriteReportCsv(const std::vector<ReportRow>& rows, const std::vector<RowProofs>* proofs,
                    std::ostream& out) {
  auto line = [&out](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << CsvField(cells[i]);
    out << "\r\n";  // RFC 4180's line break
  };
  line(ReportColumns(proofs != nullptr));
  for (size_t i = 0; i < rows.size(); ++i) line(ReportCells(rows[i], proofs ? &(*proofs)[i] : nullptr));
}

void WriteReportJsonLines(const std::vector<ReportRow>& rows, const std::vector<RowProofs>* proofs,
                          std::ostream& out) {
  for (size_t i = 0; i < rows.size(); ++i) {
    out << ReportRowJson(rows[i], proofs ? &(*proofs)[i] : nullptr)
               .dump(-1, ' ', false, Json::error_handler_t::replace)
        << '\n';
  }
}

namespace {

// Printable ASCII only: a byte sequence of one UTF-8 character outside it,
// or a control character, is one "?".
std::string TerminalSafe(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (c >= 0x80 && c < 0xc0) continue;  // a continuation byte: its lead was shown
    out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  }
  return out;
}

std::string Cell(const std::string& v, size_t width) {
  std::string out = TerminalSafe(v);
  if (out.size() > width) out = out.substr(0, width - 1) + "~";
  return out + std::string(width - out.size() + 2, ' ');
}

std::string TableApprovers(const ReportRow& row) {
  std::string out;
  for (const ReportApproval& a : row.approvals) {
    if (!out.empty()) out += ", ";
    out += a.approver + ':' + a.decision;
    if (a.wait_us) out += ' ' + Seconds(*a.wait_us) + 's';
  }
  return out;
}

}  // namespace

void WriteReportTable(const std::vector<ReportRow>& rows, std::ostream& out) {
  struct Column {
    const char* name;
    size_t width;
  };
  static constexpr Column kColumns[] = {
      {"TIME", 20},       {"ORG", 10},    {"AGENT", 14}, {"SESSION", 12},   {"REQUEST", 16}, {"TOOL", 14},
      {"INVOCATION", 36}, {"VERDICT", 7}, {"RULE", 18},  {"APPROVERS", 28}, {"OUTCOME", 24}, {"COST", 8}};
  for (const Column& c : kColumns) out << Cell(c.name, c.width);
  out << '\n';
  for (const ReportRow& r : rows) {
    const std::string cost = NumberText(r.cost_usd ? r.cost_usd : r.reserved_usd);
    const std::string outcome = r.error_code.empty() ? r.outcome : r.outcome + ' ' + r.error_code;
    const std::string cells[] = {FormatTime(r.time_us).substr(0, 19) + 'Z',
                                 r.org_id,
                                 r.agent_id,
                                 r.session_id,
                                 r.request_id,
                                 r.tool,
                                 r.invocation,
                                 r.verdict,
                                 r.rule,
                                 TableApprovers(r),
                                 outcome,
                                 cost};
    for (size_t i = 0; i < std::size(kColumns); ++i) out << Cell(cells[i], kColumns[i].width);
    out << '\n';
  }
  out << rows.size() << (rows.size() == 1 ? " call" : " calls")
      << " (--format csv or jsonl: every column, whole cells)\n";
}

bool WriteReport(const std::string& format, const std::vector<ReportRow>& rows,
                 const std::vector<RowProofs>* proofs, std::ostream& out) {
  if (format == "csv") {
    WriteReportCsv(rows, proofs, out);
  } else if (format == "jsonl") {
    WriteReportJsonLines(rows, proofs, out);
  } else if (format == "table") {
    WriteReportTable(rows, out);
  } else {
    return false;
  }
  return true;
}

}  // namespace tollgate
