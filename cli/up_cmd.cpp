// `tollgate up`: everything on one machine.
//
// The Kafka pipeline (ingest, decide, approve, execute) is built by the next
// issue. Until then `up` opens the event log under --data, appends one demo
// agent session through the real append path (group commit, hash chain,
// indexes), reads it back with get_audit_log, verifies the whole log, and
// says how to look at it with the audit commands.
#include <filesystem>
#include <future>
#include <iostream>

#include "audit/audit_query.h"
#include "audit/event_log.h"
#include "audit/verify.h"
#include "cli/commands.h"
#include "core/sha256.h"

namespace tollgate::cli {
namespace {

std::vector<Event> DemoSession(const std::string& session, int64_t t0) {
  std::vector<Event> out;
  struct Call { const char* tool; Json args; const char* verdict; };
  const Call calls[] = {{"echo", {{"text", "hello"}}, "allow"},
                        {"current_time", Json::object(), "allow"},
                        {"delete_file", {{"path", "notes.txt"}}, "deny"}};
  int64_t t = t0;
  int n = 0;
  for (const auto& c : calls) {
    const std::string rid = session + "-req-" + std::to_string(++n);
    auto ev = [&](const char* type, Json data) {
      Event e;
      e.id = MakeEventId(type, rid);
      e.type = type;
      e.time_us = (t += 1500);
      e.org_id = "demo-org";
      e.agent_id = "demo-agent";
      e.session_id = session;
      e.request_id = rid;
      e.tool = c.tool;
      e.data = std::move(data);
      out.push_back(std::move(e));
    };
    ev("request.received", {{"request", {{"tool", c.tool}, {"args", c.args}}},
                            {"args_hash", Sha256Hex(c.args.dump())},
                            {"received_at", FormatTime(t)}});
    ev("decision.made", {{"verdict", c.verdict}, {"reason", "demo policy"}, {"rule", "demo"},
                         {"danger_level", std::string(c.verdict) == "allow" ? "SAFE" : "HIGH"},
                         {"policy_version", "demo"}});
    if (std::string(c.verdict) == "allow") {
      ev("execution.started", {{"executor", "demo"}, {"attempt", 1}});
      ev("execution.completed", {{"result", {{"success", true}, {"data", c.args}, {"error", nullptr},
                                             {"meta", {{"duration_ms", 1}}}}},
                                 {"duration_ms", 1}});
    }
  }
  return out;
}

int RunUp(const std::string& data, const std::string& durability_name) {
  Durability durability;
  if (!ParseDurability(durability_name, &durability)) {
    std::cerr << "tollgate: --durability must be sync or buffered\n";
    return 2;
  }
  std::filesystem::create_directories(data);
  std::unique_ptr<EventLog> log;
  LogOptions opts;
  opts.durability = durability;
  Status s = EventLog::Open(data + "/log", opts, &log);
  if (!s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 2;
  }
  const std::string session = "demo-session-" + std::to_string(log->head_seq() + 1);
  std::vector<std::future<AppendResult>> pending;
  for (Event& e : DemoSession(session, NowMicros())) pending.push_back(log->AppendAsync(std::move(e)));
  for (auto& f : pending) {
    AppendResult r = f.get();
    if (!r.status.ok()) {
      std::cerr << "tollgate: append failed: " << r.status.ToString() << "\n";
      return 2;
    }
  }
  std::cout << "tollgate: event log at " << data << "/log (durability " << durability_name << ")\n"
            << "  appended demo session " << session << "; head seq " << log->head_seq() << "\n";
  AuditQuery q;
  q.session_id = session;
  AuditPage page;
  s = GetAuditLog(log->store(), QueryScope::Operator(), q, &page);
  if (!s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 2;
  }
  for (const Event& e : page.events) {
    std::cout << "  seq " << e.seq << "  " << e.type << "  " << e.tool << "  " << e.hash.substr(0, 16) << "…\n";
  }
  VerifyReport report = VerifyLog(log->store());
  std::cout << "  verify: " << report.Summary() << "\n\n"
            << "Look at it:\n"
            << "  tollgate audit query --data " << data << "/log --session " << session << "\n"
            << "  tollgate audit verify --data " << data << "/log\n"
            << "  tollgate audit export --data " << data << "/log --out audit.jsonl\n"
            << "The Kafka pipeline (ingest → decide → approve → execute) is not built yet;\n"
            << "`up` will run it here once it is.\n";
  return report.ok() ? 0 : 1;
}

}  // namespace

void AddUpCommand(CLI::App& app, int* exit_code) {
  auto data = std::make_shared<std::string>(kDefaultDataDir);
  auto durability = std::make_shared<std::string>("sync");
  auto* up = app.add_subcommand("up", "run tollgate on this machine (embedded defaults)");
  up->add_option("--data", *data, "data directory (the log lives in DATA/log)")->capture_default_str();
  up->add_option("--durability", *durability, "sync (fdatasync per batch) or buffered")->capture_default_str();
  up->callback([data, durability, exit_code] { *exit_code = RunUp(*data, *durability); });
}

}  // namespace tollgate::cli
