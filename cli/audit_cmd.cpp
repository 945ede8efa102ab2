// `tollgate audit query|verify|export|import|report|checkpoint|proof|
// consistency|verify-proof`.
//
// Readers open the log as a RocksDB secondary, so they work while `tollgate
// up` is writing it; import opens it as the writer. checkpoint, proof and
// consistency ask the running `up` (its HTTP API, which holds the tree and
// signs); report asks it when it runs, else reads the log; verify-proof
// needs neither log nor network (audit/verify_proof.h).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "audit/audit_proofs.h"
#include "audit/audit_query.h"
#include "audit/compliance_report.h"
#include "audit/event_log.h"
#include "audit/export.h"
#include "audit/merkle_store.h"
#include "audit/query_params.h"
#include "audit/verify.h"
#include "audit/verify_proof.h"
#include "cli/admin_client.h"
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
  bool proofs = false;
};

// The log's Merkle tree, for --proofs (E_NOT_CONFIGURED for a log without one).
Status OpenTree(const LogStore& store, std::unique_ptr<MerkleStore>* tree) {
  Status s = MerkleStore::Open(store, tree);
  if (s.ok() && !(*tree)->present()) s = Status::Error("E_NOT_CONFIGURED", "this log keeps no Merkle tree");
  return s;
}

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
  std::unique_ptr<MerkleStore> tree;
  if (s.ok() && f.proofs) s = OpenTree(*store, &tree);
  if (!s.ok()) return Fail(s);
  q.json_lines = true;
  for (;;) {
    AuditPage page;
    s = GetAuditLog(*store, QueryScope::Operator(), q, &page);
    // Each record with its tlog-proof, which names its checkpoint
    // (audit/audit_proofs.h): what verify-proof --record reads.
    std::string checkpoint;
    if (s.ok() && tree) s = ProveAuditRecords(*tree, &page.lines, &checkpoint);
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

// `audit query`.
void AddQueryCommand(CLI::App* audit, int* exit_code) {
  auto qf = std::make_shared<QueryFlags>();
  auto* query = audit->add_subcommand("query", "print matching events as JSON lines (get_audit_log)");
  query->add_option("--data", qf->data, "data directory (or the log directory in it)")->capture_default_str();
  for (const QueryFilter& filter : kQueryFilters)
    query->add_option(filter.flag, qf->params[filter.param], filter.help);
  query->add_option("--type", qf->types, "event type (repeatable, or comma-separated)");
  query->add_flag("--desc", qf->descending, "newest first");
  query->add_flag("--all", qf->all_pages, "follow cursors to the end");
  query->add_flag("--proofs", qf->proofs,
                  "each event with its inclusion proof against the latest signed checkpoint (check with "
                  "audit verify-proof --record)");
  query->callback([qf, exit_code] { *exit_code = RunQuery(*qf); });
}

// `audit verify`: a database, or an export file offline.
void AddVerifyCommand(CLI::App* audit, int* exit_code) {
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
}

struct ExportFlags {
  std::string data = kDefaultDataDir, out, since, until;
  ExportRange range;
  uint64_t from = 0, to = 0;
  bool proofs = false;
};

int RunExport(ExportFlags& f) {
  if (f.from) f.range.from_seq = f.from;
  if (f.to) f.range.to_seq = f.to;
  if (!f.since.empty()) f.range.since_us = ParseTimeFlag("--since", f.since);
  if (!f.until.empty()) f.range.until_us = ParseTimeFlag("--until", f.until);
  std::unique_ptr<LogStore> store;
  Status s = OpenReader(f.data, &store);
  if (!s.ok()) return Fail(s);
  std::unique_ptr<MerkleStore> tree;  // --proofs: each record's inclusion proof
  if (f.proofs && !(s = OpenTree(*store, &tree)).ok()) return Fail(s);
  ExportStats stats;
  if (f.out.empty()) {
    s = ExportLog(*store, f.range, std::cout, &stats, tree.get());
  } else {
    std::ofstream out(f.out, std::ios::trunc);
    s = out ? ExportLog(*store, f.range, out, &stats, tree.get())
            : Status::Error(errc::kLogIO, "cannot write " + f.out);
  }
  if (!s.ok()) return Fail(s);
  std::cerr << "exported seq " << stats.from_seq << ".." << stats.to_seq << " (" << stats.count
            << " events)\n";
  return 0;
}

// `audit export`.
void AddExportCommand(CLI::App* audit, int* exit_code) {
  auto ef = std::make_shared<ExportFlags>();
  auto* exp = audit->add_subcommand("export", "write the log (or a range) as verifiable JSON lines");
  exp->add_option("--data", ef->data, "data directory (or the log directory in it)")->capture_default_str();
  exp->add_option("--out", ef->out, "output file (default: stdout)");
  exp->add_option("--from-seq", ef->from, "first seq");
  exp->add_option("--to-seq", ef->to, "last seq");
  exp->add_option("--since", ef->since, "events from this time (RFC 3339)");
  exp->add_option("--until", ef->until, "events before this time (RFC 3339)");
  exp->add_flag("--proofs", ef->proofs,
                "each record with its inclusion proof against the latest signed checkpoint "
                "(check with audit verify-proof --record)");
  exp->callback([ef, exit_code] { *exit_code = RunExport(*ef); });
}

// `audit import`.
void AddImportCommand(CLI::App* audit, int* exit_code) {
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

// --- The compliance report (audit/compliance_report.h) ---

// `audit report`'s filters: {flag, query-string name, help}; the names are
// GET /v1/audit/report's, which AuditParamsFromQueryString reads for both.
constexpr QueryFilter kReportFilters[] = {
    {"--org", "org", "org id"},
    {"--agent", "agent", "agent id"},
    {"--session", "session", "session id"},
    {"--tool", "tool", "tool name; an alias's calls count under the tool it expands to too"},
    {"--verdict", "verdict", "decision verdict: allow, deny or ask"},
    {"--since", "since", "calls from this time (RFC 3339, inclusive)"},
    {"--until", "until", "calls before this time (RFC 3339, exclusive)"},
};

struct ReportFlags {
  std::string data = kDefaultDataDir, token_file, format;
  std::map<std::string, std::string> params;  // by query-string name; "" = not given
  bool proofs = false;
};

// Without a running `up`: the same report from the log, as the operator
// (every org). Proofs need the tree's checkpoints, which `up` serves.
int ReportFromLog(const ReportFlags& f, const std::string& format) {
  if (f.proofs) {
    std::cerr << "tollgate: --proofs needs the running `tollgate up --data " << f.data
              << "` (it holds the checkpoints)\n";
    return 2;
  }
  std::multimap<std::string, std::string> query(f.params.begin(), f.params.end());
  ReportFilter filter;
  Status s = ReportFilterFromParams(AuditParamsFromQueryString(query), &filter);
  std::unique_ptr<LogStore> store;
  if (s.ok()) s = OpenReader(f.data, &store);
  std::vector<ReportRow> rows;
  if (s.ok()) s = ReadReport(*store, QueryScope::Operator(), filter, &rows);
  if (!s.ok()) return Fail(s);
  WriteReport(format, rows, nullptr, std::cout);
  std::cout << std::flush;
  return 0;
}

int RunReport(const ReportFlags& f) {
  // A person at a terminal reads a table; a pipe or a file gets CSV.
  const std::string format = !f.format.empty() ? f.format : isatty(STDOUT_FILENO) ? "table" : "csv";
  const std::string url = LiveApiUrl(f.data);
  if (url.empty()) return ReportFromLog(f, format);
  std::string path = "/v1/audit/report?format=" + EncodeQueryParam(format);
  for (const auto& [k, v] : f.params) {
    if (!v.empty()) path += "&" + k + "=" + EncodeQueryParam(v);
  }
  if (f.proofs) path += "&proofs=1";
  std::string token, text;
  Status s = ResolveToken({f.data, f.token_file}, &token);
  if (!s.ok()) return Fail(s);
  s = ApiGetText(url, token, path, &text);
  if (!s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 1;
  }
  std::cout << text << std::flush;
  return 0;
}

// `audit report`.
void AddReportCommand(CLI::App* audit, int* exit_code) {
  auto f = std::make_shared<ReportFlags>();
  auto* cmd = audit->add_subcommand(
      "report", "the compliance report: one row per call, with its decision, approvers, outcome and cost");
  cmd->add_option("--data", f->data, "data directory of `tollgate up` (or its log)")->capture_default_str();
  cmd->add_option("--token-file", f->token_file,
                  "an auditor's or admin's token (default: $TOLLGATE_TOKEN, DATA/admin.token)");
  for (const QueryFilter& filter : kReportFilters)
    cmd->add_option(filter.flag, f->params[filter.param], filter.help);
  cmd->add_option("--format", f->format, "table, csv or jsonl (default: table on a terminal, else csv)")
      ->check(CLI::IsMember({"table", "csv", "jsonl"}));
  cmd->add_flag("--proofs", f->proofs,
                "each row with the inclusion proof of each of its events (csv, jsonl; needs `up`)");
  cmd->callback([f, exit_code] { *exit_code = RunReport(*f); });
}

// --- Checkpoints and proofs: served by the running `up` (its HTTP API) ---

struct LiveFlags {
  std::string data = kDefaultDataDir, token_file;
  uint64_t size = 0, seq = 0, from = 0, to = 0;
  bool fresh = false;
  CLI::Option* size_opt = nullptr;  // given or not (0 is a size)
};

// GET `path` of the running API and print its text as is.
int PrintFromApi(const LiveFlags& f, const std::string& path) {
  const std::string url = LiveApiUrl(f.data);
  if (url.empty()) {
    std::cerr << "tollgate: no running API in " << f.data
              << " (checkpoints and proofs are served by `tollgate up --data " << f.data << "`)\n";
    return 2;
  }
  std::string token, text;
  Status s = ResolveToken({f.data, f.token_file}, &token);
  if (!s.ok()) return Fail(s);
  s = ApiGetText(url, token, path, &text);
  if (!s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 1;
  }
  std::cout << text << std::flush;
  return 0;
}

std::string SizeParam(const LiveFlags& f, const char* sep) {
  return f.size_opt->count() ? sep + std::string("size=") + std::to_string(f.size) : "";
}

CLI::App* AddLiveCommand(CLI::App* audit, const char* name, const char* help, LiveFlags* f) {
  auto* cmd = audit->add_subcommand(name, help);
  cmd->add_option("--data", f->data, "data directory of `tollgate up`")->capture_default_str();
  cmd->add_option("--token-file", f->token_file,
                  "an auditor's or admin's token (default: $TOLLGATE_TOKEN, DATA/admin.token)");
  return cmd;
}

// `audit checkpoint`, `audit proof`, `audit consistency`.
void AddLiveCommands(CLI::App* audit, int* exit_code) {
  auto cf = std::make_shared<LiveFlags>();
  auto* cp = AddLiveCommand(audit, "checkpoint", "print the latest signed checkpoint (C2SP tlog-checkpoint)",
                            cf.get());
  cf->size_opt = cp->add_option("--size", cf->size, "the stored checkpoint of this tree size instead");
  cp->add_flag("--fresh", cf->fresh, "sign one of the log as it stands first");
  cp->callback([cf, exit_code] {
    std::string q = SizeParam(*cf, "&") + (cf->fresh ? "&fresh=1" : "");
    if (!q.empty()) q[0] = '?';
    *exit_code = PrintFromApi(*cf, "/v1/audit/checkpoint" + q);
  });

  auto pf = std::make_shared<LiveFlags>();
  auto* proof =
      AddLiveCommand(audit, "proof", "print an event's inclusion proof (C2SP tlog-proof)", pf.get());
  proof->add_option("--seq", pf->seq, "the event's seq")->required();
  pf->size_opt = proof->add_option("--size", pf->size,
                                   "against the stored checkpoint of this size (default: the latest)");
  proof->callback([pf, exit_code] {
    *exit_code = PrintFromApi(*pf, "/v1/audit/proof?seq=" + std::to_string(pf->seq) + SizeParam(*pf, "&"));
  });

  auto kf = std::make_shared<LiveFlags>();
  auto* cons = AddLiveCommand(
      audit, "consistency",
      "print the proof that the tree of size --from is a prefix of the stored checkpoint of size --to",
      kf.get());
  cons->add_option("--from", kf->from, "the size of the checkpoint you hold")->required();
  cons->add_option("--to", kf->to, "the size of a newer stored checkpoint")->required();
  cons->callback([kf, exit_code] {
    *exit_code = PrintFromApi(
        *kf, "/v1/audit/consistency?from=" + std::to_string(kf->from) + "&to=" + std::to_string(kf->to));
  });
}

// --- verify-proof: offline (audit/verify_proof.h) ---

struct VerifyProofFlags {
  std::string key;
  std::vector<std::string> checkpoints, proofs, records, consistency, witnesses;
  size_t quorum = 0;
  bool complete = false;
};

Status ReadInputs(const std::vector<std::string>& paths, std::vector<ProofInput>* out) {
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    if (!in) return Status::Error(errc::kNotFound, "cannot read " + path);
    text << in.rdbuf();  // an empty file stays empty (and fails its check)
    out->push_back({path, text.str()});
  }
  return Status::Ok();
}

int RunVerifyProof(const VerifyProofFlags& f) {
  ProofBundle b;
  b.key = f.key;
  b.witnesses = f.witnesses;
  b.quorum = f.quorum;
  b.complete = f.complete;
  Status s = ReadInputs(f.checkpoints, &b.checkpoints);
  if (s.ok()) s = ReadInputs(f.proofs, &b.proofs);
  if (s.ok()) s = ReadInputs(f.records, &b.records);
  if (s.ok()) s = ReadInputs(f.consistency, &b.consistency);
  if (!s.ok()) return Fail(s);
  const ProofReport r = VerifyProofBundle(b);
  std::cout << r.Text();
  return r.ok() ? 0 : 1;
}

void AddVerifyProofCommand(CLI::App* audit, int* exit_code) {
  auto f = std::make_shared<VerifyProofFlags>();
  auto* vp = audit->add_subcommand(
      "verify-proof", "check checkpoints and proofs offline against a pinned key; exit 1 on any failure");
  vp->add_option("--key", f->key, "the log's checkpoint verifier key (name+hash+key)")->required();
  vp->add_option("--checkpoint", f->checkpoints, "a signed checkpoint file (repeatable)");
  vp->add_option("--proof", f->proofs, "a tlog-proof file (repeatable)");
  vp->add_option("--record", f->records,
                 "export records, one JSON line each: the proofs' leaves (repeatable)");
  vp->add_option("--consistency", f->consistency,
                 "a consistency proof between two --checkpoint files (repeatable)");
  vp->add_option("--witness", f->witnesses, "a witness's verifier key (repeatable)");
  vp->add_option("--quorum", f->quorum, "cosignatures required of the witnesses (default: all)");
  vp->add_flag("--complete", f->complete,
               "the records of each request and session form an unbroken chain from its first event");
  vp->callback([f, exit_code] { *exit_code = RunVerifyProof(*f); });
}

}  // namespace

void AddAuditCommands(CLI::App& app, int* exit_code) {
  auto* audit = app.add_subcommand(
      "audit",
      "query, verify, export and import the event log; the compliance report; checkpoints and proofs");
  audit->require_subcommand(1);
  AddQueryCommand(audit, exit_code);
  AddVerifyCommand(audit, exit_code);
  AddExportCommand(audit, exit_code);
  AddImportCommand(audit, exit_code);
  AddReportCommand(audit, exit_code);
  AddLiveCommands(audit, exit_code);
  AddVerifyProofCommand(audit, exit_code);
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
