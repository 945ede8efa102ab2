// GET /v1/audit/report: the compliance report (audit/compliance_report.h,
// docs/compliance_report.md), one row per call, as CSV, JSON lines or a
// terminal table; proofs=1 gives each row the inclusion proof of each of
// its events, as /v1/audit's proofs=1 does (AddAuditProofs).
#include <sstream>
#include <string>
#include <vector>

#include "api/http_api_impl.h"
#include "audit/compliance_report.h"
#include "audit/query_params.h"

namespace tollgate {
namespace http_api {
namespace {

// Each row's proofs: one AddAuditProofs over every row's seqs, so that
// all of them are against the same checkpoint. False after answering.
bool RowProofsOf(Impl* im, httplib::Response& res, const std::vector<ReportRow>& rows,
                 std::vector<RowProofs>* proofs) {
  std::vector<std::string> lines;
  for (const ReportRow& r : rows) {
    for (uint64_t seq : r.seqs) lines.push_back("{\"seq\":" + std::to_string(seq) + "}");
  }
  std::string note;
  if (!AddAuditProofs(im, res, &lines, &note)) return false;
  size_t next = 0;
  for (const ReportRow& r : rows) {
    RowProofs p;
    for (size_t i = 0; i < r.seqs.size(); ++i) {
      Json j;
      Status s = ParseJson(lines[next++], &j);
      if (!s.ok()) {
        Error(res, 500, s.code(), s.message());
        return false;
      }
      p.push_back(std::move(j));
    }
    proofs->push_back(std::move(p));
  }
  return true;
}

const char* ContentType(const std::string& format) {
  if (format == "csv") return "text/csv; charset=utf-8";
  if (format == "jsonl") return "application/x-ndjson";
  return "text/plain; charset=utf-8";
}

// GET /v1/audit/report?org=&agent=&session=&tool=&verdict=&since=&until=
// &format=jsonl|csv|table&proofs=1: auditor, admin; a caller bound to one
// org reads that org's calls.
void HandleReport(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  if (!Authorize(im->options, req, res, {"auditor", "admin"}, &who)) return;
  ReportFilter filter;
  Status s = ReportFilterFromParams(AuditParamsFromQueryString(req.params), &filter);
  if (!s.ok()) return Error(res, 400, s.code(), s.message());
  if (!ScopedOrg(req, res, who, &filter.org_id)) return;
  const QueryScope scope = who.org_id == "*" ? QueryScope::Operator() : QueryScope::Tenant(who.org_id);
  std::string format = Param(req, "format");
  if (format.empty()) format = "jsonl";
  if (format != "csv" && format != "jsonl" && format != "table") {
    return Error(res, 400, errc::kInvalidQuery, "format must be csv, jsonl or table, not '" + format + "'");
  }
  const bool proofs = Param(req, "proofs") == "1";
  if (proofs && format == "table") {
    return Error(res, 400, errc::kInvalidQuery, "proofs=1 needs format=csv or jsonl");
  }
  std::vector<ReportRow> rows;
  s = ReadReport(*im->store, scope, filter, &rows);
  if (!s.ok()) return Error(res, StatusFor(s), s.code(), s.message());
  std::vector<RowProofs> row_proofs;
  if (proofs && !RowProofsOf(im, res, rows, &row_proofs)) return;
  std::ostringstream out;
  WriteReport(format, rows, proofs ? &row_proofs : nullptr, out);
  res.status = 200;
  if (format == "csv") {
    res.set_header("Content-Disposition", "attachment; filename=\"tollgate-report.csv\"");
  }
  res.set_content(out.str(), ContentType(format));
}

}  // namespace

void RegisterReportRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/v1/audit/report", Bind(im, HandleReport));
}

}  // namespace http_api
}  // namespace tollgate
