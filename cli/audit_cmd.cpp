// `tollgate audit query|verify|export|import`.
//
// Readers open the log as a RocksDB secondary, so they work while `tollgate
// up` is writing it; import opens it as the writer.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "audit/audit_query.h"
#include "audit/event_log.h"
#include "audit/export.h"
#include "audit/query_params.h"
#include "audit/verify.h"
#include "cli/commands.h"

namespace tollgate::cli {
namespace {

int Fail(const Status& s) {
  std::cerr << "tollgate: " << s.ToString() << "\n";
  return 2;
}

Status OpenReader(const std::string& data, std::unique_ptr<LogStore>* store) {
  return OpenLogReader(data, store);
}

// `audit query`'s filters, by get_audit_log's parameter names
// (audit/query_params.h reads them, as it reads the HTTP API's and the
// tool's): {flag, parameter, help}.
struct QueryFilter {
  const char* flag;
  const char* param;
  const char* help;
};
constexpr QueryFilter kQueryFilters[] = {
    {"--org", "org_id", "org id"},
    {"--agent", "agent_id", "agent id"},
    {"--session", "session_id", "session id"},
    {"--request", "request_id", "request id"},
    {"--tool", "tool", "tool name"},
    {"--verdict", "verdict", "decision verdict: allow, deny or ask"},
    {"--since", "since", "from this time (RFC 3339, inclusive)"},
    {"--until", "until", "before this time (RFC 3339, exclusive)"},
    {"--cursor", "cursor", "continue after a previous page"},
    {"--limit", "limit", "events per page (default 100, max 1000)"},
};

struct QueryFlags {
  std::string data = kDefaultDataDir;
  std::map<std::string, std::string> params;  // by parameter; "" = not given
  std::vector<std::string> types;
  bool descending = false;
  bool all_pages = false;
};

int RunQuery(const QueryFlags& f) {
  Json params{{"types", f.types}, {"descending", f.descending}};
  for (const auto& [k, v] : f.params) {
    if (!v.empty()) params[k] = v;
  }
  AuditQuery q;
  Status s = AuditQueryFromParams(params, &q);
  if (!s.ok()) return Fail(s);
  std::unique_ptr<LogStore> store;
  s = OpenReader(f.data, &store);
  if (!s.ok()) return Fail(s);
  q.json_lines = true;
  for (;;) {
    AuditPage page;
    s = GetAuditLog(*store, QueryScope::Operator(), q, &page);
    if (!s.ok()) return Fail(s);
    for (const std::string& l : page.lines) std::cout << l << '\n';
    if (page.next_cursor.empty()) break;
    if (!f.all_pages) {
      std::cerr << "more: --cursor " << page.next_cursor << "\n";
      break;
    }
    q.cursor = page.next_cursor;
  }
  return 0;
}

int PrintReport(const VerifyReport& r) {
  std::cout << r.Summary() << "\n";
  for (const auto& p : r.problems) {
    std::cout << "  seq " << p.seq << ": " << p.status.ToString() << "\n";
  }
  if (r.truncated_problems) std::cout << "  (more problems not shown)\n";
  return r.ok() ? 0 : 1;
}

}  // namespace

void AddAuditCommands(CLI::App& app, int* exit_code) {
  auto* audit = app.add_subcommand("audit", "query, verify, export and import the event log");
  audit->require_subcommand(1);

  auto qf = std::make_shared<QueryFlags>();
  auto* query = audit->add_subcommand("query", "print matching events as JSON lines (get_audit_log)");
  query->add_option("--data", qf->data, "data directory (or the log directory in it)")->capture_default_str();
  for (const QueryFilter& filter : kQueryFilters)
    query->add_option(filter.flag, qf->params[filter.param], filter.help);
  query->add_option("--type", qf->types, "event type (repeatable, or comma-separated)");
  query->add_flag("--desc", qf->descending, "newest first");
  query->add_flag("--all", qf->all_pages, "follow cursors to the end");
  query->callback([qf, exit_code] { *exit_code = RunQuery(*qf); });

  auto vdata = std::make_shared<std::string>(kDefaultDataDir);
  auto vfile = std::make_shared<std::string>();
  auto* verify = audit->add_subcommand("verify", "check the hash chain and every index; exit 1 on any break");
  verify->add_option("--data", *vdata, "data directory (or the log directory in it)")->capture_default_str();
  verify->add_option("--file", *vfile, "verify an export file offline instead");
  verify->callback([vdata, vfile, exit_code] {
    if (!vfile->empty()) {
      std::ifstream in(*vfile);
      if (!in) {
        *exit_code = Fail(Status::Error(errc::kNotFound, "cannot open " + *vfile));
        return;
      }
      *exit_code = PrintReport(VerifyExport(in));
      return;
    }
    std::unique_ptr<LogStore> store;
    Status s = OpenReader(*vdata, &store);
    *exit_code = s.ok() ? PrintReport(VerifyLog(*store)) : Fail(s);
  });

  struct ExportFlags {
    std::string data = kDefaultDataDir, out, since, until;
    ExportRange range;
    uint64_t from = 0, to = 0;
  };
  auto ef = std::make_shared<ExportFlags>();
  auto* exp = audit->add_subcommand("export", "write the log (or a range) as verifiable JSON lines");
  exp->add_option("--data", ef->data, "data directory (or the log directory in it)")->capture_default_str();
  exp->add_option("--out", ef->out, "output file (default: stdout)");
  exp->add_option("--from-seq", ef->from, "first seq");
  exp->add_option("--to-seq", ef->to, "last seq");
  exp->add_option("--since", ef->since, "events from this time (RFC 3339)");
  exp->add_option("--until", ef->until, "events before this time (RFC 3339)");
  exp->callback([ef, exit_code] {
    if (ef->from) ef->range.from_seq = ef->from;
    if (ef->to) ef->range.to_seq = ef->to;
    if (!ef->since.empty()) ef->range.since_us = ParseTimeFlag("--since", ef->since);
    if (!ef->until.empty()) ef->range.until_us = ParseTimeFlag("--until", ef->until);
    std::unique_ptr<LogStore> store;
    Status s = OpenReader(ef->data, &store);
    if (!s.ok()) {
      *exit_code = Fail(s);
      return;
    }
    ExportStats stats;
    if (ef->out.empty()) {
      s = ExportLog(*store, ef->range, std::cout, &stats);
    } else {
      std::ofstream out(ef->out, std::ios::trunc);
      s = out ? ExportLog(*store, ef->range, out, &stats)
              : Status::Error(errc::kLogIO, "cannot write " + ef->out);
    }
    if (!s.ok()) {
      *exit_code = Fail(s);
      return;
    }
    std::cerr << "exported seq " << stats.from_seq << ".." << stats.to_seq << " (" << stats.count
              << " events)\n";
  });

  auto idata = std::make_shared<std::string>(kDefaultDataDir);
  auto ifile = std::make_shared<std::string>();
  auto* imp =
      audit->add_subcommand("import", "load a verified export into a log it continues (e.g. a fresh one)");
  imp->add_option("--data", *idata, "data directory (or the log directory in it)")->capture_default_str();
  imp->add_option("--file", *ifile, "export file")->required();
  imp->callback([idata, ifile, exit_code] {
    std::ifstream in(*ifile);
    if (!in) {
      *exit_code = Fail(Status::Error(errc::kNotFound, "cannot open " + *ifile));
      return;
    }
    std::unique_ptr<EventLog> log;
    LogOptions opts;
    Status s = EventLog::Open(LogDirOf(*idata), opts, &log);
    uint64_t n = 0;
    if (s.ok()) s = ImportLog(*log, in, &n);
    if (!s.ok()) {
      *exit_code = Fail(s);
      return;
    }
    std::cerr << "imported " << n << " events; head seq " << log->head_seq() << "\n";
  });
}

std::string LogDirOf(const std::string& data) {
  std::error_code ec;
  const std::filesystem::path d(data);
  if (std::filesystem::exists(d / "log" / "CURRENT", ec) ||
      std::filesystem::exists(d / "endpoints.json", ec)) {
    return (d / "log").string();
  }
  return data;
}

Status OpenLogReader(const std::string& data, std::unique_ptr<LogStore>* store) {
  const std::string dir = LogDirOf(data);
  Status s = LogStore::Open(dir, OpenMode::kSecondary, store);
  if (!s.ok() && s.code() == errc::kNotFound) {
    return Status::Error(s.code(), "no event log at " + data + " or " + data +
                                       "/log: --data takes the data directory "
                                       "`up --data` used (or its log directory)");
  }
  if (s.ok()) s = (*store)->CatchUp();
  return s;
}

}  // namespace tollgate::cli
