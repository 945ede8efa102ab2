// `tollgate rules list|revoke`: the agent-local "allow always" rules
// (docs/approvals.md). list reads the log (a RocksDB secondary, like
// `approvals list`); revoke calls the running up's HTTP API (POST
// /v1/rules/revoke) with an admin token, which appends the revoking
// policy.updated: a revocation is on the record like the grant it undoes.
// Exit codes: 0 done, 1 no such rule, 2 usage or connection error.
#include <unistd.h>

#include <iostream>

#include "audit/agent_rules.h"
#include "cli/admin_client.h"
#include "cli/commands.h"

namespace tollgate::cli {
namespace {

int Fail(const std::string& what) {
  std::cerr << "tollgate: " << what << "\n";
  return 2;
}

struct ListFlags {
  std::string data = kDefaultDataDir, org, agent;
  bool json = false;
};

int RunList(const ListFlags& f) {
  std::unique_ptr<LogStore> store;
  Status s = OpenLogReader(f.data, &store);
  std::vector<AgentRule> rules;
  if (s.ok()) s = ListAgentRules(*store, f.org, f.agent, &rules);
  if (!s.ok()) return Fail(s.ToString());
  if (!f.json && isatty(STDOUT_FILENO)) {
    for (const auto& r : rules) {
      std::cout << r.org_id << "/" << r.agent_id << "  " << r.pattern << "  (granted by " << r.granted_by
                << ", " << FormatTime(r.time_us) << ", " << r.source << ")\n";
    }
  } else {
    for (const auto& r : rules) std::cout << r.ToJson().dump() << "\n";
  }
  std::cerr << rules.size() << " rule(s) in force\n";
  return 0;
}

struct RevokeFlags {
  std::string data = kDefaultDataDir, token_file, org, agent, pattern, comment;
};

int RunRevoke(const RevokeFlags& f) {
  AdminTarget t{f.data, f.token_file};
  std::string token;
  Status s = ResolveToken(t, &token);
  if (!s.ok()) return Fail(s.ToString());
  const std::string url = LiveApiUrl(f.data);
  if (url.empty())
    return Fail("no running `tollgate up` with an HTTP API found through " + f.data + "/endpoints.json");
  Json body{{"agent_id", f.agent}, {"pattern", f.pattern}};
  if (!f.org.empty()) body["org_id"] = f.org;
  if (!f.comment.empty()) body["comment"] = f.comment;
  int status = 0;
  Json reply;
  s = ApiCall(url, token, "POST", "/v1/rules/revoke", body.dump(), &status, &reply);
  if (status == 0) return Fail(s.ToString());
  std::cout << reply.dump(2) << std::endl;
  return status == 200 ? 0 : status == 404 ? 1 : 2;
}

}  // namespace

void AddRulesCommands(CLI::App& app, int* exit_code) {
  auto* rules = app.add_subcommand("rules", "list or revoke the agents' \"allow always\" rules");
  rules->require_subcommand(1);

  auto lf = std::make_shared<ListFlags>();
  auto* list =
      rules->add_subcommand("list", "the rules in force: a line each on a terminal, JSON lines otherwise");
  list->add_option("--data", lf->data, "data directory of `tollgate up` (or its log)")->capture_default_str();
  list->add_option("--org", lf->org, "only this org");
  list->add_option("--agent", lf->agent, "only this agent");
  list->add_flag("--json", lf->json, "JSON lines");
  list->callback([lf, exit_code] { *exit_code = RunList(*lf); });

  auto rf = std::make_shared<RevokeFlags>();
  auto* revoke = rules->add_subcommand("revoke", "revoke one rule (a logged policy.updated)");
  revoke->add_option("pattern", rf->pattern, "the rule's pattern, as `rules list` prints it")->required();
  revoke->add_option("--agent", rf->agent, "the agent")->required();
  revoke->add_option("--org", rf->org, "its org (needed with a deployment-wide token)");
  revoke->add_option("--comment", rf->comment, "why, for the record");
  revoke->add_option("--data", rf->data, "data directory of `tollgate up`")->capture_default_str();
  revoke->add_option("--token-file", rf->token_file,
                     "an admin token (default $TOLLGATE_TOKEN, else DATA/admin.token)");
  revoke->callback([rf, exit_code] { *exit_code = RunRevoke(*rf); });
}

}  // namespace tollgate::cli
