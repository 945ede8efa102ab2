// `tollgate replay`: a session's timeline, its re-decision (--verify), and
// what-if under a candidate policy (--policy), for one session or an
// agent's sessions in a time range. The work is replay/'s; this file reads
// the log (as a RocksDB secondary, like `audit`, so it works while `up` is
// writing) and prints.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "replay/log_source.h"
#include "replay/timeline.h"

namespace tollgate::cli {
namespace {

struct ReplayFlags {
  std::string session;
  std::string data = kDefaultDataDir;
  bool json = false;
  bool verify = false;
  std::string policy;
  std::string agent, since, until;
};

int Fail(const Status& s) {
  std::cerr << "tollgate: " << s.ToString() << "\n";
  return 2;
}

// --data may name the data directory (holding log/) or the log itself.
Status OpenLog(const std::string& data, std::unique_ptr<LogStore>* store) {
  std::error_code ec;
  const bool is_data_dir = std::filesystem::exists(std::filesystem::path(data) / "log" / "CURRENT", ec);
  Status s = LogStore::Open(is_data_dir ? data + "/log" : data, OpenMode::kSecondary, store);
  if (s.ok()) s = (*store)->CatchUp();
  return s;
}

int RunTimeline(const ReplayFlags& f, const LogStore& store) {
  std::vector<Event> events;
  Status s = replay::ReadSession(store, f.session, &events);
  if (!s.ok()) return Fail(s);
  replay::SessionTimeline t = replay::BuildTimeline(f.session, std::move(events));
  if (f.json) std::cout << replay::TimelineToJson(t).dump() << "\n";
  else std::cout << replay::FormatTimeline(t);
  return 0;
}

int RunReplay(ReplayFlags& f) {
  if (f.session.empty() && f.agent.empty()) {
    std::cerr << "tollgate: name a SESSION, or --agent A --since T with --policy FILE\n";
    return 2;
  }
  std::unique_ptr<LogStore> store;
  Status s = OpenLog(f.data, &store);
  if (!s.ok()) return Fail(s);
  if (!f.session.empty() && !f.verify && f.policy.empty()) return RunTimeline(f, *store);
  std::cerr << "tollgate: --verify and --policy need the policy engine (not built yet)\n";
  return 2;
}

}  // namespace

void AddReplayCommands(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ReplayFlags>();
  auto* r = app.add_subcommand(
      "replay", "a session's timeline; --verify re-decides it; --policy FILE shows what a candidate policy changes");
  r->add_option("session", f->session, "session id");
  r->add_option("--data", f->data, "data directory (or the log directory in it)")->capture_default_str();
  r->add_flag("--json", f->json, "one JSON object instead of text");
  r->add_flag("--verify", f->verify,
              "re-decide every request under the policy and budgets then in force and check the session's hash "
              "chain; exit 1 on any difference");
  r->add_option("--policy", f->policy, "what-if: re-decide under this candidate policy file and show what changes");
  r->add_option("--agent", f->agent, "with --policy and no SESSION: every session of this agent");
  r->add_option("--since", f->since, "with --agent: from this time (RFC 3339, inclusive)");
  r->add_option("--until", f->until, "with --agent: before this time (RFC 3339, exclusive)");
  r->callback([f, exit_code] { *exit_code = RunReplay(*f); });
}

}  // namespace tollgate::cli
