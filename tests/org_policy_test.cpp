// Per-org policy (docs/policy.md, "Organisations"): an org's section under
// `orgs:` changes that org's decisions and nobody else's, cannot lift a
// deployment deny, gives the org a version of its own; and the budget
// ledger keeps two orgs' requests with one request id apart.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/schema.h"
#include "core/sha256.h"
#include "decide/decide_stage.h"
#include "decide/policy_engine.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'795'000'000'000'000;  // a fixed received_at

PolicyPtr MustLoad(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

Json Req(const std::string& org, const std::string& agent, const std::string& tool, Json args,
         const std::string& rid = "r1", double cost = -1) {
  Json r = {{"request_id", rid},  {"org_id", org}, {"agent_id", agent},
            {"session_id", "s1"}, {"tool", tool},  {"args", std::move(args)}};
  if (cost >= 0) r["estimated_cost_usd"] = cost;
  return r;
}

// The decision without its version (what an org's section may not change
// for another org is everything; the version of an org with a section is
// its own).
Json WithoutVersion(Json d) {
  d.erase("policy_version");
  return d;
}

// The deployment, and one org per kind of override; "plain" and "unlisted"
// have no section.
const char* kOrgsPolicy = R"(
mode: ask
approval_threshold: HIGH
deny: ["*:*password*"]
allow: ["builtin:echo", "builtin:read_file"]
tools:
  write_file: {danger: MEDIUM, cost_usd: 1}
budgets:
  - {name: org-day, scope: org, window: day, max_usd: 100}
  - {name: session-calls, scope: session, window: session, max_calls: 50}
orgs:
  plain-mode:
    mode: restrict
  denier:
    deny: ["bash:*"]
  allower:
    allow: ["builtin:echo", "cli:report"]
  agency:
    agents:
      bot:
        tools: [echo]
      helper:
        mode: dangerous
  budgeted:
    budgets:
      - {name: org-day, scope: org, window: day, max_usd: 1}
  tooled:
    tools:
      write_file: {danger: HIGH}
)";

const char* const kOrgs[] = {"plain",   "unlisted", "plain-mode", "denier",
                             "allower", "agency",   "budgeted",   "tooled"};

struct Expect {
  const char* verdict;
  const char* rule_prefix;
};

struct OrgCase {
  const char* name;
  const char* agent;
  const char* tool;
  Json args;
  double cost;
  Expect everyone;                       // "plain", and every org not below
  std::map<std::string, Expect> differ;  // the orgs whose section changes it
};

TEST(OrgPolicy, AnOrgsSectionChangesThatOrgsVerdictsAndNoOtherOrgs) {
  PolicyInForce pif;
  pif.SetFile(MustLoad(kOrgsPolicy));
  const std::vector<OrgCase> cases = {
      {"mode replaces",
       "x",
       "write_file",
       {{"path", "n.txt"}},
       -1,
       {"ask", "mode:ask@org"},
       {{"plain-mode", {"deny", "mode:restrict@org"}}, {"tooled", {"ask", "approval_threshold"}}}},
      {"deny is the union",
       "x",
       "execute_command",
       {{"command", "ls"}},
       -1,
       {"ask", "approval_threshold"},
       {{"denier", {"deny", "org.deny:bash:*"}}, {"plain-mode", {"deny", "mode:restrict@org"}}}},
      {"the deployment's deny holds in every org",
       "x",
       "read_file",
       {{"path", "/srv/password.txt"}},
       -1,
       {"deny", "org.deny:*:*password*"},
       {}},
      {"the deployment's deny holds for a dangerous agent",
       "helper",
       "read_file",
       {{"path", "/srv/password.txt"}},
       -1,
       {"deny", "org.deny:*:*password*"},
       {}},
      {"allow replaces: a glob the org added",
       "x",
       "cli:report",
       Json::object(),
       -1,
       {"ask", "approval_threshold"},
       {{"allower", {"allow", "org.allow:cli:report"}}, {"plain-mode", {"deny", "mode:restrict@org"}}}},
      {"allow replaces: a glob the org dropped",
       "x",
       "read_file",
       {{"path", "notes.txt"}},
       -1,
       {"allow", "org.allow:builtin:read_file"},
       {{"allower", {"allow", "mode:ask@org"}}}},
      {"an org's agent entry binds that org's agent alone",
       "bot",
       "read_file",
       {{"path", "notes.txt"}},
       -1,
       {"allow", "org.allow:builtin:read_file"},
       {{"agency", {"deny", "agent.tools"}}, {"allower", {"allow", "mode:ask@org"}}}},
      {"an agent only the org has",
       "helper",
       "write_file",
       {{"path", "n.txt"}},
       -1,
       {"ask", "mode:ask@org"},
       {{"agency", {"allow", "mode:dangerous@agent"}},
        {"plain-mode", {"deny", "mode:restrict@org"}},
        {"tooled", {"ask", "approval_threshold"}}}},
      {"budgets merge by name",
       "x",
       "echo",
       {{"text", "hi"}},
       5.0,
       {"allow", "org.allow:builtin:echo"},
       {{"budgeted", {"deny", "budget:org-day"}}}},
  };
  BudgetLedger ledger;
  for (const auto& c : cases) {
    Json plain_req = Req("plain", c.agent, c.tool, c.args, "r1", c.cost);
    const Json plain = Decide(pif, ledger, DecideInput{&plain_req, kT0});
    EXPECT_EQ(plain["verdict"], c.everyone.verdict) << c.name << ": " << plain.dump();
    EXPECT_EQ(plain["rule"].get<std::string>().rfind(c.everyone.rule_prefix, 0), 0u)
        << c.name << ": " << plain["rule"];
    for (const char* org : kOrgs) {
      Json req = Req(org, c.agent, c.tool, c.args, "r1", c.cost);
      const Json d = Decide(pif, ledger, DecideInput{&req, kT0});
      EXPECT_TRUE(SchemaRegistry::Builtin().Validate("event_data.decision.made", d).ok())
          << c.name << d.dump();
      auto it = c.differ.find(org);
      if (it == c.differ.end()) {
        EXPECT_EQ(WithoutVersion(d), WithoutVersion(plain)) << c.name << " in org " << org;
      } else {
        EXPECT_EQ(d["verdict"], it->second.verdict) << c.name << " in org " << org << ": " << d.dump();
        EXPECT_EQ(d["rule"].get<std::string>().rfind(it->second.rule_prefix, 0), 0u)
            << c.name << " in org " << org << ": " << d["rule"];
      }
    }
  }
  // tools merge field by field: the org's danger, the deployment's cost.
  Json req = Req("tooled", "x", "write_file", {{"path", "n.txt"}});
  Json d = Decide(pif, ledger, DecideInput{&req, kT0});
  EXPECT_EQ(d["danger_level"], "HIGH");
  EXPECT_EQ(d["reservation"]["usd"], 1.0);
  // The budget message names the org's limit.
  req = Req("budgeted", "x", "echo", {{"text", "hi"}}, "r1", 5.0);
  d = Decide(pif, ledger, DecideInput{&req, kT0});
  EXPECT_NE(d["reason"].get<std::string>().find("of $1.00"), std::string::npos) << d["reason"];
  EXPECT_FALSE(d.contains("reservation"));
}

TEST(OrgPolicy, AnOrgSectionCannotRemoveADeploymentDeny) {
  PolicyInForce pif;
  pif.SetFile(MustLoad(R"(
mode: ask
deny: ["*:*password*", "bash:rm *"]
rules:
  - verdict: deny
    tool: read_file
    when: {file_prefix: /etc}
  - name: writes-ask
    tool: write_file
    verdict: ask
orgs:
  loose:
    mode: dangerous
    deny: []
    allow: ["*:*"]
    rules:
      - {name: allow-all, verdict: allow}
    agents:
      bot:
        deny: []
        allow: ["*:*"]
)"));
  BudgetLedger ledger;
  struct Case {
    const char* agent;
    const char* tool;
    Json args;
    const char* rule;
  };
  const Case denied[] = {
      {"x", "read_file", {{"path", "/srv/password"}}, "org.deny:*:*password*"},
      {"x", "execute_command", {{"command", "rm"}, {"args", {"-rf", "/"}}}, "org.deny:bash:rm *"},
      {"x", "read_file", {{"path", "/etc/hosts"}}, "org.rule:rule-0"},
      {"bot", "read_file", {{"path", "/srv/password"}}, "org.deny:*:*password*"},
  };
  for (const char* org : {"default", "loose"}) {
    for (const auto& c : denied) {
      Json req = Req(org, c.agent, c.tool, c.args);
      Json d = Decide(pif, ledger, DecideInput{&req, kT0});
      EXPECT_EQ(d["verdict"], "deny") << org << " " << c.tool << ": " << d.dump();
      EXPECT_EQ(d["rule"], c.rule) << org;
      EXPECT_EQ(d["error_code"], "E_POLICY_DENIED");
    }
  }
  // What the org did replace: its allow rule, its mode; the deployment's
  // ask rule is gone for it.
  Json req = Req("loose", "x", "write_file", {{"path", "/srv/x"}});
  EXPECT_EQ(Decide(pif, ledger, DecideInput{&req, kT0})["rule"], "mode:dangerous@org");
  req = Req("default", "x", "write_file", {{"path", "/srv/x"}});
  EXPECT_EQ(Decide(pif, ledger, DecideInput{&req, kT0})["rule"], "org.rule:writes-ask");
  // The effective document shows the union.
  const Json eff = pif.file()->EffectiveDoc("loose");
  EXPECT_EQ(eff["deny"], Json({"*:*password*", "bash:rm *"}));
  EXPECT_FALSE(eff.contains("orgs"));

  // bypass would skip the deny list: refused in a section and in its agents.
  PolicyPtr p;
  Status s = LoadPolicyYaml("deny: [\"*:*x*\"]\norgs:\n  acme:\n    mode: bypass\n", "t.yaml", &p);
  EXPECT_EQ(s.code(), "E_POLICY_INVALID");
  EXPECT_NE(s.message().find("line 4: /orgs/acme/mode: bypass is not allowed"), std::string::npos)
      << s.message();
  s = LoadPolicyYaml("orgs:\n  acme:\n    agents:\n      a1:\n        mode: bypass\n", "t.yaml", &p);
  EXPECT_NE(s.message().find("line 5: /orgs/acme/agents/a1/mode: bypass"), std::string::npos) << s.message();
  // A top-level agent entry (which would bind a1 in every org) is refused whatever it says.
  s = LoadPolicyYaml("agents:\n  a1: {mode: bypass}\norgs:\n  acme: {mode: restrict}\n", "t.yaml", &p);
  EXPECT_NE(s.message().find("line 2: /agents/a1: an agent entry belongs to one org"), std::string::npos)
      << s.message();
}

// A request of an org: the version it is decided under.
std::string VersionFor(const PolicyInForce& pif, const std::string& org) {
  Json req = Req(org, "a1", "echo", Json::object());
  Json d = Decide(pif, BudgetLedger(), DecideInput{&req, kT0});
  EXPECT_EQ(d["policy_version"], pif.version(org));
  return d["policy_version"];
}

Event AllowAlways(const std::string& org, const std::string& agent, const std::string& pattern) {
  Json rule{{"agent_id", agent}, {"org_id", org}, {"allow", Json::array({pattern})}};
  std::string bytes;
  EXPECT_TRUE(CanonicalBytes(rule, &bytes).ok());
  const std::string hash = Sha256Hex(bytes);
  Event e = testing::MakeEvent("policy.updated", "req-" + org, "s1", agent, org, "write_file");
  e.data = {{"policy_version", "agent-rule:" + hash.substr(0, 16)},
            {"content_hash", hash},
            {"source", "approval:req"},
            {"tier", "agent_local"},
            {"org_id", org},
            {"agent_id", agent},
            {"allow", Json::array({pattern})},
            {"approver", "alice"}};
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("event_data.policy.updated", e.data).ok());
  return e;
}

TEST(OrgPolicy, OneOrgsEditNeverChangesAnotherOrgsVersion) {
  const std::string base = "mode: ask\nallow: [\"builtin:echo\"]\n";
  const std::string with_orgs = base + "orgs:\n  acme: {mode: restrict}\n  globex: {deny: [\"cli:*\"]}\n";
  PolicyInForce pif;
  pif.SetFile(MustLoad(base));
  const std::string v_base = VersionFor(pif, "globex");
  EXPECT_EQ(v_base, pif.file()->version()) << "no orgs: every org's version is the file's, as before";

  // Sections for acme and globex: initech (no section) keeps the version it had.
  pif.SetFile(MustLoad(with_orgs));
  const std::string acme = VersionFor(pif, "acme"), globex = VersionFor(pif, "globex");
  EXPECT_EQ(VersionFor(pif, "initech"), v_base);
  EXPECT_NE(acme, v_base);
  EXPECT_NE(globex, v_base);
  EXPECT_NE(acme, globex);
  Json globex_req = Req("globex", "a1", "echo", Json::object());
  const Json globex_before = Decide(pif, BudgetLedger(), DecideInput{&globex_req, kT0});

  // acme's section edited, a section added for another org, acme's
  // approvers: globex's version (and decision) stay byte for byte.
  const std::string edits[] = {
      base + "orgs:\n  acme: {mode: plan}\n  globex: {deny: [\"cli:*\"]}\n",
      with_orgs + "  initech: {mode: restrict}\n",
      with_orgs + "approvals:\n  orgs: {acme: {quorum: 1, approvers: [alice]}}\n",
  };
  for (const auto& edit : edits) {
    pif.SetFile(MustLoad(edit));
    EXPECT_EQ(VersionFor(pif, "globex"), globex) << edit;
    EXPECT_EQ(Decide(pif, BudgetLedger(), DecideInput{&globex_req, kT0}), globex_before) << edit;
    EXPECT_NE(pif.version(), pif.file()->version("globex")) << "the deployment version sees every edit";
  }
  pif.SetFile(MustLoad(edits[0]));
  EXPECT_NE(VersionFor(pif, "acme"), acme) << "acme's own edit changes acme's version";
  pif.SetFile(MustLoad(edits[2]));
  EXPECT_NE(VersionFor(pif, "acme"), acme) << "acme's approvers are acme's policy";
  EXPECT_EQ(VersionFor(pif, "initech"), v_base);

  // An "allow always" in acme: acme's version gains +local, globex's not.
  pif.SetFile(MustLoad(with_orgs));
  const std::string deployment_before = pif.version();
  ASSERT_TRUE(pif.Apply(AllowAlways("acme", "a1", "builtin:write_file")).ok());
  EXPECT_EQ(VersionFor(pif, "acme").rfind(acme + "+local:", 0), 0u) << VersionFor(pif, "acme");
  EXPECT_EQ(VersionFor(pif, "globex"), globex);
  EXPECT_EQ(VersionFor(pif, "initech"), v_base);
  EXPECT_EQ(Decide(pif, BudgetLedger(), DecideInput{&globex_req, kT0}), globex_before);
  EXPECT_NE(pif.version(), deployment_before) << "logged: the deployment version moves";
  // One for an org without a section: its own version alone moves.
  const std::string acme_local = VersionFor(pif, "acme");
  ASSERT_TRUE(pif.Apply(AllowAlways("initech", "a1", "builtin:write_file")).ok());
  EXPECT_EQ(VersionFor(pif, "initech").rfind(v_base + "+local:", 0), 0u);
  EXPECT_EQ(VersionFor(pif, "acme"), acme_local);
  EXPECT_EQ(VersionFor(pif, "globex"), globex);
  EXPECT_EQ(VersionFor(pif, "hooli"), v_base);
  // The version of an org is the hash of its effective document.
  std::string bytes;
  ASSERT_TRUE(CanonicalBytes(pif.file()->EffectiveDoc("globex"), &bytes).ok());
  EXPECT_EQ(globex, "file:" + Sha256Hex(bytes).substr(0, 16));
  // A reload of the same file (another text, same content) changes nothing.
  pif.SetFile(
      MustLoad("allow: [builtin:echo]   # reordered\nmode: ask\n"
               "orgs:\n  globex: {deny: [\"cli:*\"]}\n  acme: {mode: restrict}\n"));
  EXPECT_EQ(VersionFor(pif, "globex"), globex);
  EXPECT_EQ(VersionFor(pif, "acme"), acme_local);
}

// The ledger is keyed by (org, request): two orgs' requests with the same
// request_id are two requests.
Json Reservation(double usd, int64_t at) {
  return {{"verdict", "allow"},
          {"reservation", {{"usd", usd}, {"received_at", FormatTime(at)}, {"budgets", Json::array()}}}};
}

TEST(OrgLedger, TwoOrgsRequestsWithOneIdReserveSettleAndReleaseIndependently) {
  BudgetLedger l;
  auto sum = [&](const std::string& org, const std::string& exclude = "") {
    return l.Sum(BudgetLedger::Scope::kOrg, org, "", "", "", INT64_MIN, kT0, exclude);
  };
  l.ApplyDecision("r1", Req("o1", "a1", "echo", {}), Reservation(2.0, kT0));
  l.ApplyDecision("r1", Req("o2", "a1", "echo", {}), Reservation(3.0, kT0));
  EXPECT_EQ(l.size(), 2u) << "the second org's reservation is not taken for a repeat of the first's";
  ASSERT_NE(l.Find("o1", "r1"), nullptr);
  ASSERT_NE(l.Find("o2", "r1"), nullptr);
  EXPECT_EQ(l.Find("o3", "r1"), nullptr);
  EXPECT_EQ(sum("o1").micros, 2'000'000);
  EXPECT_EQ(sum("o2").micros, 3'000'000);
  // Each request excludes itself, not the other org's.
  EXPECT_EQ(sum("o1", "r1").micros, 0);
  EXPECT_EQ(sum("o2", "r1").micros, 0);

  // o1's completes: o2's stays reserved.
  l.Apply(
      testing::MakeEvent("execution.completed", "r1", "s1", "a1", "o1", "echo", kT0, {{"cost_usd", 0.5}}));
  EXPECT_EQ(l.Find("o1", "r1")->state, BudgetEntry::State::kSettled);
  EXPECT_EQ(l.Find("o2", "r1")->state, BudgetEntry::State::kReserved);
  EXPECT_EQ(sum("o1").micros, 500'000);
  EXPECT_EQ(sum("o2").micros, 3'000'000);
  // o2's is denied by a human: o1's settlement stays.
  l.Apply(testing::MakeEvent("approval.denied", "r1", "s1", "a1", "o2"));
  EXPECT_EQ(l.Find("o2", "r1")->state, BudgetEntry::State::kReleased);
  EXPECT_EQ(l.Find("o1", "r1")->state, BudgetEntry::State::kSettled);
  EXPECT_EQ(sum("o1").calls, 1);
  EXPECT_EQ(sum("o2").calls, 0);
  // A deny decision releases its own org's request only.
  l.ApplyDecision("r2", Req("o1", "a1", "echo", {}, "r2"), Reservation(1.0, kT0));
  l.ApplyDecision("r2", Req("o2", "a1", "echo", {}, "r2"), Reservation(1.0, kT0));
  Event deny = testing::MakeEvent("decision.made", "r2", "s1", "a1", "o2", "echo", kT0,
                                  {{"verdict", "deny"}, {"error_code", "E_POLICY_DENIED"}});
  l.Apply(deny);
  EXPECT_EQ(l.Find("o1", "r2")->state, BudgetEntry::State::kReserved);
  EXPECT_EQ(l.Find("o2", "r2")->state, BudgetEntry::State::kReleased);
  // The struct path keys the same way.
  Decision d;
  d.verdict = "allow";
  d.has_reservation = true;
  d.reserve_micros = 4'000'000;
  d.received_at = FormatTime(kT0);
  l.ApplyDecision("r3", "o1", "a1", "s1", "echo", d);
  l.ApplyDecision("r3", "o2", "a1", "s1", "echo", d);
  EXPECT_EQ(l.Find("o1", "r3")->reserved_micros, 4'000'000);
  EXPECT_EQ(l.Find("o2", "r3")->reserved_micros, 4'000'000);

  // The snapshot keeps both; a v1 snapshot (keyed by request_id alone) is refused.
  BudgetLedger copy;
  ASSERT_TRUE(BudgetLedger::Deserialize(l.Serialize(), &copy).ok());
  EXPECT_TRUE(copy == l);
  EXPECT_EQ(copy.size(), 6u);
  EXPECT_EQ(copy.Find("o2", "r1")->state, BudgetEntry::State::kReleased);
  Json body = {{"applied_seq", 0},
               {"entries", {{"r1", Json::array({"o1", "a1", "s1", "echo", kT0, 1, 0, 0})}}},
               {"format", "decide-ledger.v1"}};
  std::string bytes, v1;
  ASSERT_TRUE(CanonicalBytes(body, &bytes).ok());
  ASSERT_TRUE(CanonicalBytes(Json{{"body", body}, {"sha256", Sha256Hex(bytes)}}, &v1).ok());
  EXPECT_FALSE(BudgetLedger::Deserialize(v1, &copy).ok());
}

// Two orgs' budgets under one policy: the same request ids in both, and
// each org spends its own (the second org's calls are not mistaken for
// repeats of the first's, which would let it spend for free).
TEST(OrgLedger, EachOrgsBudgetCountsItsOwnRequestsWithTheSameIds) {
  PolicyInForce pif;
  pif.SetFile(
      MustLoad("allow: [\"*:*\"]\nbudgets:\n  - {name: cap, scope: agent, window: day, max_usd: 2}\n"
               "orgs:\n  o2:\n    budgets:\n      - {name: cap, scope: agent, window: day, max_usd: 3}\n"));
  BudgetLedger ledger;
  std::map<std::string, int> allowed;
  for (int i = 0; i < 5; ++i) {
    for (const char* org : {"o1", "o2"}) {
      Json req = Req(org, "a1", "echo", Json::object(), "r" + std::to_string(i), 1.0);
      Json d = Decide(pif, ledger, DecideInput{&req, kT0 + i});
      ledger.ApplyDecision(req["request_id"].get<std::string>(), req, d);
      allowed[org] += d["verdict"] == "allow";
    }
  }
  EXPECT_EQ(allowed["o1"], 2);
  EXPECT_EQ(allowed["o2"], 3);
}

// `tollgate policy check` (the real binary) on errors inside `orgs:`.
int RunTollgate(const std::string& args, std::string* out) {
  testing::CommandResult r = testing::RunCommand(std::string(TOLLGATE_BIN) + " " + args + " 2>&1");
  *out = std::move(r.out);
  return r.exit_code;
}

// Whether `policy check`'s output (FILE:LINE:COL: message lines) has a
// line that says `needle`, written "line N: what" (N and what on one line).
bool Says(const std::string& out, const std::string& needle) {
  if (!needle.starts_with("line ")) return out.find(needle) != std::string::npos;
  const size_t colon = needle.find(':');
  const std::string at = ".yaml:" + needle.substr(5, colon - 5) + ":";
  const std::string what = needle.substr(std::min(needle.size(), colon + 2));
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(at) != std::string::npos && line.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(OrgPolicyCheck, ErrorsInAnOrgSectionNameTheirLine) {
  const std::string head =
      "mode: ask\napproval_threshold: HIGH\napprovals:\n  groups: {ops: [alice, bob]}\norgs:\n  acme:\n";
  // Line 7 is the first line inside acme's section.
  struct Case {
    std::string body, needle;
  };
  const Case cases[] = {
      {"    mode: sideways\n", "line 7: /orgs/acme/mode"},
      {"    modes: ask\n", "line 7:"},                        // unknown key, as at the top
      {"    deny: [\"cli:ok\", \"cli:[bad\"]\n", "line 7:"},  // a bad glob
      {"    tools:\n      echo: {danger: EXTREME}\n", "line 8:"},
      {"    agents:\n      a1:\n        budgets:\n          - {name: b, window: fortnight, max_usd: 1}\n",
       "line 10:"},
      {"    approvals:\n      default: {quorum: 3, approvers: [\"group:ops\"]}\n",
       "line 8: quorum 3 needs at least that many approvers; 2 listed (in org 'acme')"},
      {"    approvals:\n      tools:\n        x: {approvers: [\"group:nobody\"]}\n",
       "unknown approver group 'nobody'"},
      {"    http_request: {base_url: \"https://acme.example\"}\n", "line 7: /orgs/acme/http_request"},
      {"    execute: {}\n", "line 7:"},
      {"    version: 2\n", "line 7:"},
      {"    orgs: {}\n", "line 7:"},
      {"    approvals:\n      orgs: {acme: {quorum: 1}}\n", "line 8:"},
      {"    mode: bypass\n", "line 7: /orgs/acme/mode: bypass is not allowed"},
      {"    mode: ask\n    mode: plan\n", "line 8: duplicate key 'mode'"},
      {"    rules:\n      - {name: r, tool: \"[x\", verdict: deny}\n", "line 8:"},
  };
  TempDir dir;
  std::string out;
  for (const auto& c : cases) {
    const std::string file = dir.sub("p.yaml");
    std::ofstream(file, std::ios::trunc) << head << c.body;
    EXPECT_EQ(RunTollgate("policy check " + file, &out), 1) << c.body << out;
    EXPECT_TRUE(Says(out, c.needle)) << c.body << " -> " << out;
  }
  // An org id with a control character is refused.
  std::ofstream(dir.sub("ctl.yaml"), std::ios::trunc) << "orgs:\n  \"ac\\x01me\": {mode: ask}\n";
  EXPECT_EQ(RunTollgate("policy check " + dir.sub("ctl.yaml"), &out), 1) << out;
  EXPECT_TRUE(Says(out, "line 2:")) << out;
  // A good file: ok, with each org's version.
  std::ofstream(dir.sub("good.yaml"), std::ios::trunc)
      << head << "    mode: restrict\n  globex:\n    deny: [\"cli:*\"]\n";
  ASSERT_EQ(RunTollgate("policy check " + dir.sub("good.yaml"), &out), 0) << out;
  PolicyPtr p;
  ASSERT_TRUE(LoadPolicyFile(dir.sub("good.yaml"), &p).ok());
  EXPECT_NE(out.find("org acme: " + p->version("acme")), std::string::npos) << out;
  EXPECT_NE(out.find("org globex: " + p->version("globex")), std::string::npos) << out;
  EXPECT_NE(out.find("orgs without a section: " + p->version("initech")), std::string::npos) << out;
}

// Loaded from JSON (replay, a snapshot): no lines, the pointer in the file.
TEST(OrgPolicyCheck, AnErrorInAMergedSectionNamesItsPlaceInTheFile) {
  Json doc = {
      {"approvals", {{"groups", {{"ops", {"alice"}}}}}},
      {"orgs",
       {{"acme",
         {{"agents",
           {{"a1", {{"budgets", Json::array({{{"name", "b"}, {"window", "week"}, {"max_usd", 1}}})}}}}}}}}}};
  PolicyPtr p;
  Status s = LoadPolicyJson(doc, "json", &p);
  EXPECT_EQ(s.code(), "E_POLICY_INVALID");
  EXPECT_NE(s.message().find("/orgs/acme/agents/a1/budgets/0/window"), std::string::npos) << s.message();
  doc = {{"approvals", {{"groups", {{"ops", {"alice"}}}}}},
         {"orgs", {{"acme", {{"approvals", {{"default", {{"quorum", 2}, {"approvers", {"group:ops"}}}}}}}}}}};
  s = LoadPolicyJson(doc, "json", &p);
  EXPECT_NE(s.message().find("at /orgs/acme/approvals/default: quorum 2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tollgate
