// `tollgate replay`: a session's timeline, its re-decision (--verify), and
// what-if under a candidate policy (--policy), for one session or an
// agent's sessions in a time range. The work is replay/'s (from_log.h, which
// the HTTP API runs too); this file opens the log (as a RocksDB secondary,
// like `audit`, so it works while `up` is writing) and prints.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "decide/policy_engine.h"
#include "replay/from_log.h"

namespace tollgate::cli {
namespace {

struct ReplayFlags {
  std::string session;
  std::string data = kDefaultDataDir;
  bool json = false;
  bool verify = false;
  std::string policy;
  std::string agent, since, until;
  std::string org;
};

int Fail(const Status& s) {
  std::cerr << "tollgate: " << s.ToString() << "\n";
  return 2;
}

replay::Target TargetOf(const ReplayFlags& f) {
  replay::Target target;
  target.session_id = f.session;
  target.org_id = f.org;
  if (f.session.empty()) {
    target.agent_id = f.agent;
    if (!f.since.empty()) target.since_us = ParseTimeFlag("--since", f.since);
    if (!f.until.empty()) target.until_us = ParseTimeFlag("--until", f.until);
  }
  return target;
}

int RunTimeline(const ReplayFlags& f, const LogStore& store) {
  replay::SessionTimeline t;
  Status s = replay::ReadTimeline(store, TargetOf(f), &t);
  if (!s.ok()) return Fail(s);
  if (f.json)
    std::cout << replay::TimelineToJson(t).dump() << "\n";
  else
    std::cout << replay::FormatTimeline(t);
  return 0;
}

// --verify and --policy: re-decide the target's decisions; with --verify
// also check the chain over the target's events. Exit 1 when verify finds
// anything; what-if exits 0 whatever it finds (the changes are the answer).
int RunRedecide(const ReplayFlags& f, const LogStore& store) {
  const replay::Target target = TargetOf(f);
  replay::RedecideOptions options;
  if (!f.policy.empty()) {
    Status s = LoadPolicyFile(f.policy, &options.candidate);
    if (!s.ok()) return Fail(s);
  }
  Json out = Json::object();
  bool clean = true;
  if (f.verify) {
    replay::ChainReport chain;
    Status s = replay::CheckTargetChain(store, target, &chain);
    if (!s.ok()) return Fail(s);
    out["chain"] = chain.ToJson();
    clean = chain.ok();
    if (!f.json) {
      std::cout << "chain: " << chain.events << " events"
                << (chain.ok() ? ", every hash and both links hold\n"
                               : ", " + std::to_string(chain.problems.size()) + " problem(s):\n");
      for (const auto& p : chain.problems)
        std::cout << "  seq " << p.seq << ": " << p.status.ToString() << "\n";
    }
  }
  replay::RedecideReport report;
  Status s = replay::RedecideTarget(store, target, options, &report);
  if (!s.ok()) return Fail(s);
  if (f.verify && options.candidate == nullptr) clean = clean && report.clean();
  if (f.json) {
    out[options.candidate ? "what_if" : "verify"] = report.ToJson();
    std::cout << out.dump() << "\n";
  } else {
    std::cout << replay::FormatReport(report);
  }
  // With --verify --policy the chain decides the exit code; the decisions
  // are compared with the candidate (what-if), not verified.
  return clean ? 0 : 1;
}

int RunReplay(ReplayFlags& f) {
  if (f.session.empty() && f.agent.empty()) {
    std::cerr
        << "tollgate: name a SESSION, or --agent A [--since T] [--until T] with --policy FILE or --verify\n";
    return 2;
  }
  if (!f.session.empty() && !f.agent.empty()) {
    std::cerr << "tollgate: name a SESSION or --agent, not both\n";
    return 2;
  }
  if (f.session.empty() && !f.verify && f.policy.empty()) {
    std::cerr << "tollgate: --agent needs --policy FILE (what-if) or --verify\n";
    return 2;
  }
  std::unique_ptr<LogStore> store;
  Status s = OpenLogReader(f.data, &store);
  if (!s.ok()) return Fail(s);
  if (!f.verify && f.policy.empty()) return RunTimeline(f, *store);
  return RunRedecide(f, *store);
}

}  // namespace

void AddReplayCommands(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ReplayFlags>();
  auto* r = app.add_subcommand(
      "replay",
      "a session's timeline; --verify re-decides it; --policy FILE shows what a candidate policy changes");
  r->add_option("session", f->session, "session id");
  r->add_option("--data", f->data, "data directory (or the log directory in it)")->capture_default_str();
  r->add_flag("--json", f->json, "one JSON object instead of text");
  r->add_flag(
      "--verify", f->verify,
      "re-decide every request under the policy and budgets then in force and check the session's hash "
      "chain; exit 1 on any difference");
  r->add_option("--policy", f->policy,
                "what-if: re-decide under this candidate policy file and show what changes");
  r->add_option("--agent", f->agent, "with --policy and no SESSION: every session of this agent");
  r->add_option("--since", f->since, "with --agent: from this time (RFC 3339, inclusive)");
  r->add_option("--until", f->until, "with --agent: before this time (RFC 3339, exclusive)");
  r->add_option(
      "--org", f->org,
      "only this org's events (session and agent ids are the clients' own: two orgs may share one)");
  r->callback([f, exit_code] { *exit_code = RunReplay(*f); });
}

}  // namespace tollgate::cli
