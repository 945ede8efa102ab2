// `tollgate policy check FILE` and `tollgate policy explain ...`
// (docs/policy.md): validate a policy file, and show what decide would do
// with a call and why, without running anything.
#include <filesystem>
#include <iostream>

#include "audit/log_store.h"
#include "cli/commands.h"
#include "decide/decide_snapshot.h"
#include "decide/decide_stage.h"
#include "deploy/pipeline.h"

namespace tollgate::cli {
namespace {

// Every problem, one line each, as compilers print them: FILE:LINE:COL: what.
int RunCheck(const std::string& file) {
  PolicyPtr p;
  const std::vector<PolicyProblem> problems = CheckPolicyFile(file, &p);
  if (!problems.empty()) {
    for (const PolicyProblem& e : problems) {
      if (e.line > 0) {
        std::cerr << file << ":" << e.line << ":" << e.column << ": " << e.message << "\n";
      } else {
        // A workspace's message names its own file and line.
        std::cerr << (e.message.starts_with(file) ? "" : file + ": ") << e.message << "\n";
      }
    }
    std::cerr << file << ": " << problems.size() << (problems.size() == 1 ? " problem" : " problems")
              << (problems.size() >= 100 ? " (the first 100)" : "") << "; not loaded\n";
    return 1;
  }
  std::cout << file << ": ok (" << p->version() << ", content_hash " << p->content_hash() << ")\n";
  // Decisions carry their org's version (docs/policy.md, "Versions").
  const auto orgs = p->OrgSections();
  if (!orgs.empty()) {
    std::cout << "  orgs without a section: " << p->version("") << "\n";
    for (const auto& org : orgs) std::cout << "  org " << org << ": " << p->version(org) << "\n";
  }
  return 0;
}

struct ExplainFlags {
  std::string agent, tool, args = "{}", session = "explain", org = "default", policy, data = kDefaultDataDir,
                           at;
  double cost = -1;
};

// The session's history as the decision saw it (docs/policy.md, "History"),
// printed before the checks.
void PrintHistory(const Json& h, const std::string& session, const SessionFacts::Session* s) {
  std::cout << "history   session " << session << ": " << h.value("calls", 0) << " completed calls, "
            << h.value("integrity", "") << ", " << h.value("confidentiality", "");
  if (s != nullptr && s->integrity_seq != 0) std::cout << "; untrusted since seq " << s->integrity_seq;
  if (s != nullptr && s->confidentiality_seq != 0)
    std::cout << "; " << ConfidentialityName(s->confidentiality) << " since seq " << s->confidentiality_seq;
  if (s != nullptr && s->declassified_seq != 0)
    std::cout << "; declassified at seq " << s->declassified_seq << " by " << s->declassified_by;
  std::cout << " (up to seq " << h.value("upto", 0) << ")\n";
  if (h.contains("rule")) {
    std::cout << "          decided by history rule '" << h["rule"].get<std::string>() << "' on seq";
    for (const auto& q : h["matched"]) std::cout << " " << q.get<uint64_t>();
    std::cout << "\n";
  }
}

int RunExplain(const ExplainFlags& f) {
  Json args;
  if (!ParseJson(f.args, &args).ok() || !args.is_object()) {
    std::cerr << "tollgate: --args must be a JSON object\n";
    return 2;
  }
  // A policy file given: the decision is made under it, and the log's
  // session facts are labelled under it too (as a what-if does), so its
  // history rules apply to the session's past calls.
  PolicyPtr file;
  PolicyInForce candidate;
  if (!f.policy.empty()) {
    Status s = LoadPolicyFile(f.policy, &file);
    if (!s.ok()) {
      std::cerr << s.message() << "\n";
      return 1;
    }
    candidate.SetFile(file);
  }
  DecideState state;
  if (file != nullptr) state.set_labels_from(&candidate);
  // Budgets, session facts, agent-local rules and the policy in force from
  // the log when there is one, read as a secondary like the audit commands.
  std::string from = "no log";
  if (std::filesystem::exists(f.data + "/log")) {
    std::unique_ptr<LogStore> store;
    Status s = LogStore::Open(f.data + "/log", OpenMode::kSecondary, &store);
    if (s.ok()) s = store->CatchUp();
    uint64_t head = 0;
    Digest hash;
    if (s.ok()) s = store->ReadHead(&head, &hash);
    if (s.ok()) {
      s = RebuildDecideState(
          head, [&store](uint64_t seq, Event* e) { return store->ReadEvent(seq, e); }, "", &state);
    }
    if (!s.ok()) {
      std::cerr << "tollgate: cannot read the log under " << f.data << ": " << s.ToString() << "\n";
      return 1;
    }
    from = f.data + "/log up to seq " + std::to_string(head);
  }
  if (file == nullptr && !state.policy().has_policy()) {
    Status s = LoadPolicyFile(DefaultPolicyPath(), &file);
    if (!s.ok()) {
      std::cerr << s.message() << "\n";
      return 1;
    }
  }
  if (file != nullptr) state.SetFilePolicy(file);
  int64_t at = NowMicros();
  if (!f.at.empty()) at = ParseTimeFlag("--at", f.at);
  Json request = {{"request_id", "explain"}, {"org_id", f.org}, {"agent_id", f.agent},
                  {"session_id", f.session}, {"tool", f.tool},  {"args", args}};
  if (f.cost >= 0) request["estimated_cost_usd"] = f.cost;
  const PolicyInForce& pif = state.policy();
  const SessionFacts& facts = state.facts();
  DecideInput in{&request, at};
  in.facts = &facts;
  Json d = Decide(pif, state.ledger(), in);
  std::cout << "verdict   " << d["verdict"].get<std::string>() << "\n"
            << "reason    " << d["reason"].get<std::string>() << "\n"
            << "rule      " << d["rule"].get<std::string>() << "\n"
            << "danger    " << d["danger_level"].get<std::string>()
            << (d["read_only"] == true ? ", read-only" : ", mutating") << "\n"
            << "invocation " << d["invocation"].get<std::string>() << "\n"
            << "policy    " << d["policy_version"].get<std::string>() << " (org " << f.org << "; deployment "
            << pif.version() << "; budgets from " << from << ")\n";
  if (d.contains("history")) PrintHistory(d["history"], f.session, facts.Find(f.org, f.session));
  std::cout << "checks:\n";
  for (const auto& c : d["checks"]) {
    std::cout << "  " << c["check"].get<std::string>() << ": " << c["result"].get<std::string>();
    if (!c["detail"].get<std::string>().empty()) std::cout << "  (" << c["detail"].get<std::string>() << ")";
    std::cout << "\n";
  }
  std::cout << d.dump() << std::endl;
  return 0;
}

}  // namespace

void AddPolicyCommands(CLI::App& app, int* exit_code) {
  auto* policy = app.add_subcommand("policy", "check a policy file, explain a decision");
  policy->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  auto* check = policy->add_subcommand("check", "validate a policy file (exit 1 with line-numbered errors)");
  check->add_option("FILE", *file, "the policy file (YAML)")->required();
  check->callback([file, exit_code] { *exit_code = RunCheck(*file); });

  auto f = std::make_shared<ExplainFlags>();
  auto* explain = policy->add_subcommand(
      "explain", "the decision for a call and the path through the checks; nothing runs");
  explain->add_option("--agent", f->agent, "agent id")->required();
  explain->add_option("--tool", f->tool, "tool name")->required();
  explain->add_option("--args", f->args, "the call's args (JSON object)")->capture_default_str();
  explain->add_option("--session", f->session, "session id")->capture_default_str();
  explain->add_option("--org", f->org, "org id")->capture_default_str();
  explain->add_option("--cost", f->cost, "estimated_cost_usd of the call");
  explain->add_option("--at", f->at, "received_at (RFC 3339; default now)");
  explain->add_option("--policy", f->policy,
                      "policy file (default: the policy in force in the log, else the shipped default)");
  explain->add_option("--data", f->data, "data directory whose log supplies budgets")->capture_default_str();
  explain->callback([f, exit_code] { *exit_code = RunExplain(*f); });
}

}  // namespace tollgate::cli
