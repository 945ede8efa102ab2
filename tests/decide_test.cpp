// The policy engine (decide/policy_engine.h) layer by layer, the precedence
// between layers, budgets and the ledger (also against a real RocksDB log),
// and the decide stage's policy versions (docs/policy.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/schema.h"
#include "core/sha256.h"
#include "decide/decide_stage.h"
#include "decide/policy_engine.h"
#include "test_util.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'795'000'000'000'000;  // a fixed received_at
constexpr int64_t kSec = 1'000'000;

PolicyPtr MustLoad(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

Json Req(const std::string& agent, const std::string& tool, Json args, const std::string& rid = "r1",
         const std::string& session = "s1", const std::string& org = "o1") {
  return {{"request_id", rid},     {"org_id", org}, {"agent_id", agent},
          {"session_id", session}, {"tool", tool},  {"args", std::move(args)}};
}

// ---------------------------------------------------------------------------
// Globs.
TEST(Glob, MatchesStarQuestionClassesAndEscapes) {
  struct Case {
    const char* pattern;
    const char* text;
    bool match;
  };
  const Case cases[] = {
      {"builtin:echo", "builtin:echo", true},
      {"builtin:echo", "builtin:echoes", false},
      {"*:*password*", "bash:cat /tmp/password.txt", true},
      {"*:*password*", "builtin:read_file", false},
      {"bash:git *", "bash:git status", true},
      {"bash:git *", "bash:gitk", false},
      {"cli:deploy*", "cli:deploy-prod", true},
      {"http_request:POST https://api.example.com/*", "http_request:POST https://api.example.com/v1/x", true},
      {"http_request:POST https://api.example.com/*", "http_request:GET https://api.example.com/v1/x", false},
      {"a?c", "abc", true},
      {"a?c", "ac", false},
      {"[ab]x", "bx", true},
      {"[!ab]x", "bx", false},
      {"[a-c]x", "cx", true},
      {"*a*b*c", "xxaxxbxxc", true},
      {"*a*b*c", "xxaxxcxxb", false},
      {"x\\*y", "x*y", true},
      {"x\\*y", "xzy", false},
      {"\\[a\\]", "[a]", true},
      {"*", "", true},
  };
  for (const auto& c : cases) {
    Glob g;
    std::string err;
    ASSERT_TRUE(Glob::Compile(c.pattern, &g, &err)) << c.pattern << ": " << err;
    EXPECT_EQ(g.Match(c.text), c.match) << c.pattern << " vs " << c.text;
  }
  Glob g;
  std::string err;
  EXPECT_FALSE(Glob::Compile("abc\\", &g, &err));
  EXPECT_FALSE(Glob::Compile("a[bc", &g, &err));
  EXPECT_NE(err.find("unterminated"), std::string::npos);
}

TEST(Glob, EscapedLiteralMatchesExactlyItself) {
  const std::string inv = "http_request:POST https://x.com/a*b?[c]\\d";
  Glob g;
  std::string err;
  ASSERT_TRUE(Glob::Compile(EscapeGlob(inv), &g, &err)) << err;
  EXPECT_TRUE(g.Match(inv));
  EXPECT_FALSE(g.Match("http_request:POST https://x.com/aXXb?[c]\\d"));
  EXPECT_FALSE(g.Match(inv + "x"));
}

TEST(GlobSet, ReportsTheFirstMatchInListOrderWhateverTheIndexBucket) {
  GlobSet set;
  std::string err;
  for (const char* p : {"cli:deploy-prod*", "*:*prod*", "cli:*", "cli:deploy*"})
    ASSERT_TRUE(set.Add(p, &err));
  EXPECT_EQ(set.FirstMatch("cli:deploy-prod-eu"), 0);
  EXPECT_EQ(set.FirstMatch("cli:deploy-staging"), 2);
  EXPECT_EQ(set.FirstMatch("bash:prod"), 1);
  EXPECT_EQ(set.FirstMatch("builtin:echo"), -1);
  // Many rules with a shared prefix: still exact.
  GlobSet big;
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(big.Add("cli:tool-" + std::to_string(i) + "-*", &err));
  EXPECT_EQ(big.FirstMatch("cli:tool-737-run"), 737);
  EXPECT_EQ(big.FirstMatch("cli:tool-1000-run"), -1);
}

// ---------------------------------------------------------------------------
// Loading.
TEST(PolicyLoad, ErrorsNameTheLine) {
  struct Case {
    std::string yaml, needle;
  };
  const Case cases[] = {
      {"mode: ask\norgs:\n  o1:\n    agents:\n      a1:\n        mode: sideways\n",
       "line 6: /orgs/o1/agents/a1/mode"},
      // An agent entry is an org's: a top-level one is refused, naming its line and the org-qualified
      // spelling.
      {"mode: ask\nagents:\n  a1:\n    mode: restrict\n",
       "line 4: /agents/a1: an agent entry belongs to one org"},
      {"mode: ask\ndeny:\n  - \"cli:ok\"\n  - \"cli:[bad\"\n", "line 4:"},
      {"mode: ask\n  deny: [\n", "line 2:"},
      {"mode: ask\nmode: plan\n", "line 2: duplicate key 'mode'"},
      {"tools:\n  echo: {danger: EXTREME}\n", "line 2:"},
      {"budgets:\n  - {name: b, window: fortnight, max_usd: 1}\n", "line 2:"},
      {"unknown_key: 1\n", "unknown_key"},
      {"- just\n- a list\n", "mapping"},
      {"approvals:\n  groups: {ops: [alice]}\n  danger:\n    CRITICAL: {quorum: 2, approvers: "
       "[\"group:ops\"]}\n",
       "line 4: quorum 2 needs at least that many approvers; 1 listed"},
      {"approvals:\n  tools:\n    x: {approvers: [\"group:nobody\"]}\n", "unknown approver group 'nobody'"},
      // Kaizen's rule priority is an integer.
      {"rules:\n  - name: r\n    verdict: allow\n    priority: high\n", "line 4: /rules/0/priority"},
  };
  for (const auto& c : cases) {
    PolicyPtr p;
    Status s = LoadPolicyYaml(c.yaml, "x.yaml", &p);
    EXPECT_EQ(s.code(), "E_POLICY_INVALID") << c.yaml;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.yaml << " -> " << s.message();
    EXPECT_EQ(p, nullptr);
  }
}

// Kaizen's PermissionRule priority: a later rule of higher priority beats
// an earlier one; equal priorities keep list order.
TEST(PolicyLoad, HigherPriorityRulesMatchFirstAndTiesKeepListOrder) {
  const std::string yaml =
      "mode: ask\nrules:\n"
      "  - {name: ask-writes, tool: write_file, verdict: ask}\n"
      "  - {name: deny-etc, tool: write_file, when: {file_prefix: /etc}, verdict: deny, priority: 10}\n"
      "  - {name: first-allow, tool: echo, verdict: allow}\n"
      "  - {name: second-allow, tool: echo, verdict: allow}\n";
  PolicyInForce pif;
  pif.SetFile(MustLoad(yaml));
  BudgetLedger ledger;
  auto decide = [&](const char* tool, Json args) {
    Json req = Req("a", tool, std::move(args));
    return Decide(pif, ledger, DecideInput{&req, kT0});
  };
  Json d = decide("write_file", {{"path", "/etc/x"}, {"content", "c"}});
  EXPECT_EQ(d["verdict"], "deny") << "priority 10 beats the ask above it: " << d.dump();
  EXPECT_EQ(d["rule"], "org.rule:deny-etc");
  EXPECT_EQ(decide("write_file", {{"path", "a.txt"}, {"content", "c"}})["rule"], "org.rule:ask-writes");
  EXPECT_EQ(decide("echo", Json::object())["rule"], "org.rule:first-allow");
}

// ADR-012's ToolExecutor(auto_approve_safe=True): SAFE tools run, every
// other asks. One setting away: approval_threshold LOW.
TEST(Precedence, ThresholdLowIsAdr012sOnlySafeToolsRunWithoutApproval) {
  PolicyInForce pif;
  pif.SetFile(MustLoad("mode: ask\napproval_threshold: LOW\n"));
  BudgetLedger ledger;
  auto verdict = [&](const char* tool, Json args) {
    Json req = Req("a", tool, std::move(args));
    return Decide(pif, ledger, DecideInput{&req, kT0})["verdict"].get<std::string>();
  };
  EXPECT_EQ(verdict("read_file", {{"path", "x"}}), "allow") << "SAFE";
  EXPECT_EQ(verdict("file_exists", {{"path", "x"}}), "allow") << "SAFE";
  EXPECT_EQ(verdict("git_status", Json::object()), "ask") << "LOW, read-only: asks at this threshold";
  EXPECT_EQ(verdict("write_file", {{"path", "x"}, {"content", ""}}), "ask");
  EXPECT_EQ(verdict("delete_file", {{"path", "x"}}), "ask");
}

// The seeds' mode names are aliases: default is ask, strict is restrict.
TEST(PolicyLoad, TheSeedsModeNamesDefaultAndStrictMeanAskAndRestrict) {
  auto verdict = [](const char* yaml, const char* tool, Json args) {
    PolicyInForce pif;
    pif.SetFile(MustLoad(yaml));
    BudgetLedger ledger;
    Json req = Req("a", tool, std::move(args));
    return Decide(pif, ledger, DecideInput{&req, kT0})["verdict"].get<std::string>();
  };
  EXPECT_EQ(verdict("mode: default\n", "write_file", {{"path", "x"}, {"content", ""}}), "ask");
  EXPECT_EQ(verdict("mode: default\n", "read_file", {{"path", "x"}}), "allow");
  EXPECT_EQ(verdict("mode: strict\n", "read_file", {{"path", "x"}}), "deny");
}

// A write execute could not run is denied at decide, not sent to approvers.
TEST(PolicyLoad, AWriteWhileWritesAreDisabledIsDeniedAtDecide) {
  PolicyInForce pif;
  pif.SetFile(MustLoad("mode: ask\nexecute: {writes_enabled: false}\n"));
  BudgetLedger ledger;
  for (const char* tool : {"write_file", "delete_file"}) {
    Json req = Req("a", tool, {{"path", "x"}, {"content", ""}});
    Json d = Decide(pif, ledger, DecideInput{&req, kT0});
    EXPECT_EQ(d["verdict"], "deny") << tool;
    EXPECT_EQ(d["rule"], "registry:writes-disabled") << tool;
    EXPECT_EQ(d["error_code"], "E_WRITE_DISABLED")
        << tool << " (the seed's name; the result's alias is E_WRITES_DISABLED)";
  }
  Json read = Req("a", "read_file", {{"path", "x"}});
  EXPECT_EQ(Decide(pif, ledger, DecideInput{&read, kT0})["verdict"], "allow");
}

// A tool the policy lists but no executor runs is denied at decide, not
// approved by people and then failed at execute; one with an executor, the
// same listing otherwise, is decided as before.
TEST(PolicyLoad, AToolNoExecutorRunsIsDeniedAtDecide) {
  PolicyInForce pif;
  pif.SetFile(
      MustLoad("mode: ask\nallow: [\"*:*\"]\ntools:\n  deploy_app: {danger: LOW, read_only: true}\n"
               "  \"mcp:undeclared/*\": {danger: LOW, read_only: true}\n  \"cli:deploy\": {danger: LOW, "
               "read_only: true}\n"));
  BudgetLedger ledger;
  for (const char* tool : {"deploy_app", "mcp:undeclared/run"}) {
    Json req = Req("a", tool, Json::object());
    Json d = Decide(pif, ledger, DecideInput{&req, kT0});
    EXPECT_EQ(d["verdict"], "deny") << tool;
    EXPECT_EQ(d["rule"], "registry:no-executor") << tool;
    EXPECT_EQ(d["error_code"], "E_UNKNOWN_TOOL") << tool;
  }
  Json cli = Req("a", "cli:deploy", Json::object());
  EXPECT_EQ(Decide(pif, ledger, DecideInput{&cli, kT0})["verdict"], "allow");
}

// Once an executor has said which CLI tools it holds (tools.available), a
// cli:NAME none of them has is denied at decide; before that, and for the
// ones held, the policy decides as before. The fold keeps each executor's
// latest list, and the snapshot keeps them.
TEST(PolicyLoad, ACliToolNoExecutorHoldsIsDeniedOnceTheExecutorsHaveSaid) {
  DecideState st;
  st.SetFilePolicy(MustLoad("mode: ask\nallow: [\"*:*\"]\n"));
  auto decide = [](const DecideState& s, const char* tool) {
    Json req = Req("a", tool, Json::object());
    return Decide(s.policy(), s.ledger(), DecideInput{&req, kT0, &s.executors()});
  };
  EXPECT_EQ(decide(st, "cli:ghost")["verdict"], "allow") << "nothing said yet";
  std::vector<Event> log;
  auto said = [&](const std::string& executor, Json names) {
    Event e;
    e.type = "tools.available";
    e.seq = log.size() + 1;
    e.id = "tools-" + std::to_string(e.seq);
    e.org_id = kAllOrgs;
    e.time_us = kT0;
    e.data = {{"executor", executor}, {"cli", std::move(names)}};
    ASSERT_TRUE(st.Apply(e).ok());
    log.push_back(e);
  };
  said("h1:/tools", {"code-search"});
  said("h2:/tools", {"gpu-train"});
  EXPECT_EQ(decide(st, "cli:code-search")["verdict"], "allow");
  EXPECT_EQ(decide(st, "cli:gpu-train")["verdict"], "allow");
  Json d = decide(st, "cli:ghost");
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"], "registry:no-executor");
  EXPECT_EQ(d["error_code"], "E_UNKNOWN_TOOL");
  EXPECT_NE(d["reason"].get<std::string>().find("code-search, gpu-train"), std::string::npos) << d["reason"];
  said("h1:/tools", Json::array());  // h1's tool was removed
  EXPECT_EQ(decide(st, "cli:code-search")["verdict"], "deny");
  EXPECT_EQ(decide(st, "cli:gpu-train")["verdict"], "allow");

  // Restarted from a snapshot: the refold reads other events at seqs 1..2,
  // so what the executors said can only come from the snapshot.
  TempDir dir;
  ASSERT_TRUE(WriteDecideSnapshot(dir.sub("snap"), st, 3, "tools-3").ok());
  auto read = [&](uint64_t seq, Event* e) {
    if (seq == 3)
      *e = log[2];
    else
      *e = testing::MakeEvent("request.received", "r" + std::to_string(seq));
    e->seq = seq;
    return Status::Ok();
  };
  DecideState restored;
  bool used = false;
  ASSERT_TRUE(RebuildDecideState(3, read, dir.sub("snap"), &restored, &used).ok());
  ASSERT_TRUE(used);
  EXPECT_EQ(decide(restored, "cli:gpu-train")["verdict"], "allow")
      << decide(restored, "cli:gpu-train").dump();
  EXPECT_EQ(decide(restored, "cli:code-search")["rule"], "registry:no-executor");
}

// A few hundred bytes of aliases that would expand to 10^8 values are
// refused, not expanded: a candidate policy also comes over HTTP.
TEST(PolicyLoad, AliasesThatExpandPastTheValueLimitAreRefused) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 7; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 10; ++k) yaml += ", " + prev;
    yaml += "]\n";
  }
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "bomb.yaml", &p);
  EXPECT_EQ(s.code(), "E_POLICY_INVALID");
  EXPECT_NE(s.message().find("200000 values"), std::string::npos) << s.message();
  EXPECT_EQ(p, nullptr);
  // Aliases within the limit still load (then fail the schema, as this
  // document has no policy keys).
  s = LoadPolicyYaml("a: &a [x, y]\nb: *a\n", "small.yaml", &p);
  EXPECT_EQ(s.message().find("values"), std::string::npos) << s.message();
}

TEST(PolicyLoad, EmptyFileIsEveryDefaultAndHashIsOfTheContentNotTheText) {
  PolicyPtr a = MustLoad("");
  ASSERT_NE(a, nullptr);
  PolicyPtr b = MustLoad("mode: ask   # same content\n");
  PolicyPtr c = MustLoad("{mode: ask}");
  EXPECT_EQ(b->content_hash(), c->content_hash());
  EXPECT_NE(a->content_hash(), b->content_hash());
  EXPECT_EQ(b->version(), "file:" + b->content_hash().substr(0, 16));
  // The JSON form reloads to the same policy (what replay does).
  PolicyPtr d;
  ASSERT_TRUE(LoadPolicyJson(b->doc(), "log", &d).ok());
  EXPECT_EQ(d->content_hash(), b->content_hash());
}

TEST(PolicyLoad, QuotedScalarsStayStrings) {
  PolicyPtr p = MustLoad("description: \"true\"\nversion: 3\n");
  EXPECT_TRUE(p->doc()["description"].is_string());
  EXPECT_EQ(p->doc()["version"], 3);
}

// ---------------------------------------------------------------------------
// Precedence: one policy, a table of calls.
const char* kPolicy = R"(
mode: ask
approval_threshold: HIGH
deny:
  - "*:*password*"
  - "bash:rm *"
  - "*:*/etc/shadow*"
allow:
  - "*:*"            # the org allows everything not denied (deny still wins)
tool_allowlist: [echo, read_file, write_file, delete_file, http_request, execute_command, "cli:*", current_time]
rules:
  - name: no-etc
    tool: [read_file, write_file]
    when: {file_prefix: /etc}
    verdict: deny
  - name: git-asks
    tool: execute_command
    when: {command: git}
    verdict: ask
http_request:
  allowed_methods: [GET, HEAD, POST]
orgs:
  o1:
    agents:
      restricted:
        mode: restrict
        allow: ["builtin:echo"]
      planner:
        mode: plan
      narrow:
        tools: [echo]
      web:
        mode: restrict
        allow: ["http_request:*"]
        http_request:
          base_url: https://api.example.com/v1
          allowed_methods: [GET, POST]
          hosts: [api.example.com, "*.trusted.org"]
      web-auto:
        mode: ask
        http_request:
          allowed_methods: [GET, POST, DELETE]
          auto_approve: true
      asker:
        allow: []
      risky:
        mode: dangerous
)";

// Like kPolicy but the org allows nothing, so tiers and modes decide.
const char* kPolicyNoOrgAllow = R"(
mode: ask
approval_threshold: HIGH
deny: ["*:*password*", "cli:forbidden*"]
http_request: {allowed_methods: [GET, HEAD, POST, DELETE]}
orgs:
  o1:
    agents:
      web:
        http_request: {hosts: [api.example.com]}
      auto:
        http_request: {auto_approve: true}
      restricted:
        mode: restrict
        allow: ["builtin:echo"]
      planner:
        mode: plan
approvals:
  groups: {ops: [alice, bob], sec: [carol, dave, erin]}
  default: {quorum: 1}
  danger:
    CRITICAL: {quorum: 2, approvers: ["group:sec"], timeout_s: 300}
  tools:
    delete_file: {approvers: ["group:ops", zed], timeout_s: 120}
tools:
  "cli:nuke*": {danger: CRITICAL}
)";

struct Case {
  const char* name;
  const char* agent;
  const char* tool;
  Json args;
  const char* verdict;
  const char* rule_prefix;  // decision.rule starts with this
  const char* code;         // "" = none
};

void RunTable(const char* yaml, const std::vector<Case>& cases, const PolicyInForce* with_local = nullptr) {
  PolicyInForce pif;
  if (with_local != nullptr) pif = *with_local;
  pif.SetFile(MustLoad(yaml));
  BudgetLedger ledger;
  for (const auto& c : cases) {
    Json req = Req(c.agent, c.tool, c.args);
    Json d = Decide(pif, ledger, DecideInput{&req, kT0});
    EXPECT_EQ(d["verdict"], c.verdict) << c.name << ": " << d.dump();
    EXPECT_EQ(d["rule"].get<std::string>().rfind(c.rule_prefix, 0), 0u) << c.name << ": rule " << d["rule"];
    EXPECT_EQ(d.value("error_code", ""), c.code) << c.name;
    EXPECT_TRUE(SchemaRegistry::Builtin().Validate("event_data.decision.made", d).ok()) << c.name << d.dump();
    EXPECT_FALSE(d["checks"].empty()) << c.name;
  }
}

TEST(Precedence, OrgAllowEverythingStillHonoursDenyRulesGrantsAndModes) {
  RunTable(
      kPolicy,
      {
          {"deny beats org allow *:*",
           "anyone",
           "execute_command",
           {{"command", "echo $password"}},
           "deny",
           "org.deny:*:*password*",
           "E_POLICY_DENIED"},
          {"deny beats allow for file path subjects",
           "anyone",
           "read_file",
           {{"path", "/srv/password.txt"}},
           "deny",
           "org.deny:",
           "E_POLICY_DENIED"},
          {"file subjects are normalised",
           "anyone",
           "delete_file",
           {{"path", "/etc//./shadow"}},
           "deny",
           "org.deny:*:*/etc/shadow*",
           "E_POLICY_DENIED"},
          {"bash deny",
           "anyone",
           "execute_command",
           {{"command", "rm -rf x"}},
           "deny",
           "org.deny:bash:rm *",
           "E_POLICY_DENIED"},
          {"org allow", "anyone", "write_file", {{"path", "notes.txt"}}, "allow", "org.allow:*:*", ""},
          {"file_prefix rule denies",
           "anyone",
           "read_file",
           {{"path", "/etc/hosts"}},
           "deny",
           "org.rule:no-etc",
           "E_POLICY_DENIED"},
          {"file_prefix sees through ..",
           "anyone",
           "write_file",
           {{"path", "/srv/../etc/cron"}},
           "deny",
           "org.rule:no-etc",
           "E_POLICY_DENIED"},
          {"file_prefix is per path component",
           "anyone",
           "read_file",
           {{"path", "/etcetera/x"}},
           "allow",
           "org.allow",
           ""},
          {"command rule asks before the allow list",
           "anyone",
           "execute_command",
           {{"command", "/usr/bin/git push"}},
           "ask",
           "org.rule:git-asks",
           ""},
          {"org tool allowlist", "anyone", "calculate", Json::object(), "deny", "org.tool_allowlist",
           "E_POLICY_DENIED"},
          {"unknown tool", "anyone", "teleport", Json::object(), "deny", "registry:unknown-tool",
           "E_UNKNOWN_TOOL"},
          {"restrict allows what is allowed", "restricted", "echo", Json::object(), "allow",
           "agent.allow:builtin:echo", ""},
          {"restrict + org allow", "restricted", "write_file", {{"path", "a"}}, "allow", "org.allow", ""},
          {"plan denies writes",
           "planner",
           "write_file",
           {{"path", "a"}},
           "deny",
           "mode:plan@agent",
           "E_POLICY_DENIED"},
          {"plan allows reads", "planner", "read_file", {{"path", "a"}}, "allow", "org.allow", ""},
          {"grants", "narrow", "read_file", {{"path", "a"}}, "deny", "agent.tools", "E_POLICY_DENIED"},
          {"grants pass", "narrow", "echo", Json::object(), "allow", "org.allow", ""},
          {"http host outside allowlist",
           "web",
           "http_request",
           {{"method", "GET"}, {"url", "https://evil.com/x"}},
           "deny",
           "http.hosts",
           "E_POLICY_DENIED"},
          {"http host glob",
           "web",
           "http_request",
           {{"method", "GET"}, {"url", "https://a.trusted.org/x"}},
           "allow",
           "agent.allow:http_request:*",
           ""},
          {"http relative url resolves against base_url",
           "web",
           "http_request",
           {{"url", "/users"}},
           "allow",
           "agent.allow",
           ""},
          {"http method outside allowed_methods",
           "web",
           "http_request",
           {{"method", "DELETE"}, {"url", "https://api.example.com/x"}},
           "deny",
           "http.allowed_methods",
           "E_POLICY_DENIED"},
          {"dangerous honours deny",
           "risky",
           "execute_command",
           {{"command", "rm -rf /"}},
           "deny",
           "org.deny",
           "E_POLICY_DENIED"},
          {"dangerous allows the rest", "risky", "calculate", Json::object(), "allow", "mode:dangerous", ""},
      });
}

// Bypass is the deployment's alone (an org section or an agent entry, which
// lives in one, may not set it): it skips even the deny list.
TEST(Precedence, BypassAllowsEvenWhatIsDenied) {
  RunTable("mode: bypass\ndeny: [\"bash:rm *\"]\n", {{"bypass allows even denied",
                                                      "anyone",
                                                      "execute_command",
                                                      {{"command", "rm -rf /"}},
                                                      "allow",
                                                      "mode:bypass",
                                                      ""}});
}

TEST(Precedence, TiersModesHttpAndThreshold) {
  RunTable(
      kPolicyNoOrgAllow,
      {
          {"read-only below threshold runs in ask mode",
           "a",
           "read_file",
           {{"path", "x"}},
           "allow",
           "mode:ask@org",
           ""},
          {"mutating asks in ask mode", "a", "write_file", {{"path", "x"}}, "ask", "mode:ask@org", ""},
          {"HIGH asks at the threshold",
           "a",
           "execute_command",
           {{"command", "ls"}},
           "ask",
           "approval_threshold",
           ""},
          {"restrict denies what is not allowed",
           "restricted",
           "read_file",
           {{"path", "x"}},
           "deny",
           "mode:restrict@agent",
           "E_POLICY_DENIED"},
          {"restrict allows the allow list", "restricted", "echo", Json::object(), "allow", "agent.allow",
           ""},
          {"plan denies writes",
           "planner",
           "delete_file",
           {{"path", "x"}},
           "deny",
           "mode:plan@agent",
           "E_POLICY_DENIED"},
          {"plan lets GET through (read-only)",
           "planner",
           "http_request",
           {{"url", "https://x.org/"}},
           "allow",
           "mode:plan@agent",
           ""},
          {"mutating http asks",
           "a",
           "http_request",
           {{"method", "POST"}, {"url", "https://x.org/"}},
           "ask",
           "http.mutating",
           ""},
          {"mutating http auto-approved",
           "auto",
           "http_request",
           {{"method", "DELETE"}, {"url", "https://x.org/"}},
           "allow",
           "http.auto_approve",
           ""},
          {"GET to a host outside the allowlist",
           "web",
           "http_request",
           {{"url", "https://other.com/"}},
           "deny",
           "http.hosts",
           "E_POLICY_DENIED"},
          {"GET inside the allowlist",
           "web",
           "http_request",
           {{"url", "https://API.example.com/x"}},
           "allow",
           "mode:ask@org",
           ""},
          {"bad url", "a", "http_request", {{"url", "not a url"}}, "deny", "http.url", "E_POLICY_DENIED"},
          {"PUT not in org allowed_methods",
           "a",
           "http_request",
           {{"method", "PUT"}, {"url", "https://x.org/"}},
           "deny",
           "http.allowed_methods",
           "E_POLICY_DENIED"},
          {"cli defaults to HIGH: asks", "a", "cli:deploy", Json::object(), "ask", "approval_threshold", ""},
          {"cli deny glob", "a", "cli:forbidden-thing", Json::object(), "deny", "org.deny",
           "E_POLICY_DENIED"},
      });
}

TEST(Precedence, AgentLocalAllowLiftsAnAskButNeverAnOrgDeny) {
  PolicyInForce local;
  const std::string write_inv = "builtin:write_file";
  ASSERT_TRUE(local.AddAgentLocal("o1", "a", {EscapeGlob(write_inv)}, std::string(64, 'a')).ok());
  ASSERT_TRUE(local.AddAgentLocal("o1", "a", {"cli:forbidden*", "*:*"}, std::string(64, 'b')).ok());
  RunTable(
      kPolicyNoOrgAllow,
      {
          {"local allow lifts the ask", "a", "write_file", {{"path", "x"}}, "allow", "agent_local.allow", ""},
          {"local allow cannot lift an org deny", "a", "cli:forbidden-x", Json::object(), "deny", "org.deny",
           "E_POLICY_DENIED"},
          {"local allow cannot lift *:*password*",
           "a",
           "read_file",
           {{"path", "password"}},
           "deny",
           "org.deny",
           "E_POLICY_DENIED"},
          {"other agents are unaffected", "b", "write_file", {{"path", "x"}}, "ask", "mode:ask", ""},
      },
      &local);
}

TEST(Precedence, AgentLocalRulesComeFromPolicyUpdatedAndChangeTheVersion) {
  PolicyInForce pif;
  pif.SetFile(MustLoad(kPolicyNoOrgAllow));
  const std::string v0 = pif.version("o1");
  Event e = testing::MakeEvent("policy.updated", "req-9", "s1", "a", "o1", "write_file");
  Json body = {{"agent_id", "a"}, {"org_id", "o1"}, {"allow", {"builtin:write_file"}}};
  std::string canon;
  ASSERT_TRUE(CanonicalBytes(body, &canon).ok());
  const std::string h = Sha256Hex(canon);
  e.data = {{"policy_version", "agent-rule:" + h.substr(0, 16)},
            {"content_hash", h},
            {"source", "approval:req-9"},
            {"tier", "agent_local"},
            {"org_id", "o1"},
            {"agent_id", "a"},
            {"allow", {"builtin:write_file"}},
            {"approver", "alice"}};
  ASSERT_TRUE(SchemaRegistry::Builtin().Validate("event_data.policy.updated", e.data).ok());
  ASSERT_TRUE(pif.Apply(e).ok());
  const std::string v1 = pif.version("o1");
  EXPECT_NE(v0, v1);
  EXPECT_EQ(v1.rfind(v0 + "+local:", 0), 0u) << v1;
  ASSERT_TRUE(pif.Apply(e).ok());
  EXPECT_EQ(pif.version("o1"), v1) << "idempotent";
  Json req = Req("a", "write_file", {{"path", "x"}});
  EXPECT_EQ(Decide(pif, BudgetLedger(), DecideInput{&req, kT0})["verdict"], "allow");
  // A new file keeps the agent-local tier.
  Event f;
  f = PolicyUpdatedEvent(*MustLoad(std::string(kPolicyNoOrgAllow) + "description: v2\n"), kT0);
  ASSERT_TRUE(pif.Apply(f).ok());
  EXPECT_EQ(Decide(pif, BudgetLedger(), DecideInput{&req, kT0})["verdict"], "allow");
  EXPECT_NE(pif.version("o1"), v1);
}

TEST(Approval, RequirementResolvesGroupsQuorumAndTimeouts) {
  PolicyInForce pif;
  pif.SetFile(MustLoad(kPolicyNoOrgAllow));
  BudgetLedger ledger;
  Json req = Req("a", "cli:nuke-prod", Json::object());
  Json d = Decide(pif, ledger, DecideInput{&req, kT0});
  ASSERT_EQ(d["verdict"], "ask");
  EXPECT_EQ(d["danger_level"], "CRITICAL");
  EXPECT_EQ(d["approval"]["quorum"], 2);
  EXPECT_EQ(d["approval"]["approvers"], Json({"carol", "dave", "erin"}));
  EXPECT_EQ(d["approval"]["timeout_s"], 300);
  req = Req("a", "delete_file", {{"path", "x"}});
  d = Decide(pif, ledger, DecideInput{&req, kT0});
  ASSERT_EQ(d["verdict"], "ask");
  EXPECT_EQ(d["approval"]["quorum"], 1);
  EXPECT_EQ(d["approval"]["approvers"], Json({"alice", "bob", "zed"}));
  EXPECT_EQ(d["approval"]["timeout_s"], 120);
  req = Req("a", "write_file", {{"path", "x"}});
  d = Decide(pif, ledger, DecideInput{&req, kT0});
  EXPECT_EQ(d["approval"], Json({{"quorum", 1}, {"approvers", Json::array()}, {"timeout_s", 900}}));
}

TEST(Decision, RecordsInvocationReadOnlyChecksAndVersion) {
  PolicyInForce pif;
  pif.SetFile(MustLoad(kPolicy));
  Json req = Req("web", "http_request", {{"method", "post"}, {"url", "items"}});
  Json d = Decide(pif, BudgetLedger(), DecideInput{&req, kT0});
  EXPECT_EQ(d["invocation"], "http_request:POST https://api.example.com/v1/items");
  EXPECT_EQ(d["read_only"], false);
  EXPECT_EQ(d["policy_version"], pif.version("o1"));
  std::vector<std::string> path;
  for (const auto& c : d["checks"]) path.push_back(c["check"]);
  EXPECT_EQ(path.front(), "registry");
  EXPECT_NE(std::find(path.begin(), path.end(), "deny"), path.end());
  EXPECT_EQ(path.back(), "budget");
  req = Req("x", "execute_command", {{"command", "git"}, {"args", {"status", "-s"}}});
  EXPECT_EQ(Decide(pif, BudgetLedger(), DecideInput{&req, kT0})["invocation"], "bash:git status -s");
  req = Req("x", "cli:deploy", Json::object());
  EXPECT_EQ(Decide(pif, BudgetLedger(), DecideInput{&req, kT0})["invocation"], "cli:deploy");
  EXPECT_FALSE(Decide(pif, BudgetLedger(), DecideInput{&req, kT0}).contains("subject"));
  // File tools: the second subject, the path normalised.
  req = Req("x", "read_file", {{"path", "notes//a/../b.txt"}});
  Json f = Decide(pif, BudgetLedger(), DecideInput{&req, kT0});
  EXPECT_EQ(f["invocation"], "builtin:read_file");
  EXPECT_EQ(f["subject"], "read_file:notes/b.txt");
}

TEST(Decision, NoPolicyDeniesWithENoPolicy) {
  Json req = Req("a", "echo", Json::object());
  Json d = Decide(PolicyInForce(), BudgetLedger(), DecideInput{&req, kT0});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["error_code"], "E_NO_POLICY");
}

TEST(Decision, DependsOnReceivedAtNeverTheWallClock) {
  PolicyInForce pif;
  pif.SetFile(MustLoad("budgets:\n  - {name: per-minute, scope: agent, window: minute, max_calls: 1}\n"));
  BudgetLedger ledger;
  ledger.ApplyDecision(
      "old", Req("a", "echo", {}),
      {{"verdict", "allow"}, {"reservation", {{"usd", 0}, {"received_at", FormatTime(kT0 - 30 * kSec)}}}});
  Json req = Req("a", "echo", Json::object(), "r2");
  const int64_t first_at = NowMicros();
  Json first = Decide(pif, ledger, DecideInput{&req, kT0});
  // The wall clock has moved on between the two calls; the time decide
  // uses is the input's (kT0), which the test drives.
  ASSERT_TRUE(testing::WaitUntil([&] { return NowMicros() > first_at; }));
  Json again = Decide(pif, ledger, DecideInput{&req, kT0});
  EXPECT_EQ(first, again);
  EXPECT_EQ(first["verdict"], "deny") << "the call 30 s earlier is inside the minute";
  // Decided as of two minutes later, the window has rolled.
  Json later = Decide(pif, ledger, DecideInput{&req, kT0 + 120 * kSec});
  EXPECT_EQ(later["verdict"], "allow");
}

// ---------------------------------------------------------------------------
// Budgets.
Json Reservation(double usd, int64_t at) {
  return {{"verdict", "allow"}, {"reservation", {{"usd", usd}, {"received_at", FormatTime(at)}}}};
}

Event Completed(const std::string& rid, double cost, uint64_t seq = 0) {
  Event e = testing::MakeEvent("execution.completed", rid);
  e.data = {{"cost_usd", cost}};
  e.seq = seq;
  return e;
}

TEST(Ledger, ReserveSettleReleaseAndIdempotence) {
  BudgetLedger l;
  Json r = Req("a1", "echo", {}, "r1", "s1", "o1");
  l.ApplyDecision("r1", r, Reservation(2.0, kT0));
  l.ApplyDecision("r1", r, Reservation(2.0, kT0));  // twice: nothing changes
  auto sum = [&] { return l.Sum(BudgetLedger::Scope::kAgent, "o1", "a1", "", "", INT64_MIN, kT0, ""); };
  EXPECT_EQ(sum().micros, 2'000'000);
  EXPECT_EQ(sum().calls, 1);
  l.Apply(Completed("r1", 0.5));
  EXPECT_EQ(sum().micros, 500'000) << "settled at the actual cost";
  l.Apply(Completed("r1", 9.0));
  EXPECT_EQ(sum().micros, 500'000) << "a second completion changes nothing";
  // Released on approval.denied / expired / a deny.
  l.ApplyDecision("r2", Req("a1", "echo", {}, "r2"), Reservation(1.0, kT0));
  l.ApplyDecision("r3", Req("a1", "echo", {}, "r3"), Reservation(1.0, kT0));
  EXPECT_EQ(sum().micros, 2'500'000);
  l.Apply(testing::MakeEvent("approval.denied", "r2"));
  l.Apply(testing::MakeEvent("approval.expired", "r3"));
  EXPECT_EQ(sum().micros, 500'000);
  EXPECT_EQ(sum().calls, 1);
  l.Apply(Completed("r2", 5.0));
  EXPECT_EQ(sum().micros, 500'000) << "released stays released";
  // Excluding the request being decided.
  EXPECT_EQ(l.Sum(BudgetLedger::Scope::kAgent, "o1", "a1", "", "", INT64_MIN, kT0, "r1").micros, 0);
}

TEST(Ledger, ManyLateEntriesKeepSumsExact) {
  BudgetLedger l;
  int64_t want = 0;
  for (int i = 0; i < 500; ++i) {
    // Alternating early and late times force the late list and its rebuilds.
    int64_t at = kT0 + (i % 2 ? i : -i) * kSec;
    l.ApplyDecision("r" + std::to_string(i), Req("a1", "echo", {}), Reservation(0.001 * (i + 1), at));
    if (at > kT0 - 100 * kSec && at <= kT0 + 100 * kSec) want += 1000 * (i + 1);
    if (i % 3 == 0) l.Apply(Completed("r" + std::to_string(i), 0));
    if (i % 3 == 0 && at > kT0 - 100 * kSec && at <= kT0 + 100 * kSec) want -= 1000 * (i + 1);
  }
  EXPECT_EQ(l.Sum(BudgetLedger::Scope::kOrg, "o1", "", "", "", kT0 - 100 * kSec, kT0 + 100 * kSec, "").micros,
            want);
  BudgetLedger copy;
  ASSERT_TRUE(BudgetLedger::Deserialize(l.Serialize(), &copy).ok());
  EXPECT_TRUE(copy == l);
  EXPECT_EQ(
      copy.Sum(BudgetLedger::Scope::kOrg, "o1", "", "", "", kT0 - 100 * kSec, kT0 + 100 * kSec, "").micros,
      want);
  std::string bad = l.Serialize();
  bad[bad.size() / 2] ^= 1;
  EXPECT_FALSE(BudgetLedger::Deserialize(bad, &copy).ok());
}

const char* kBudgetPolicy = R"(
mode: ask
allow: ["*:*"]
tools:
  "cli:gpu*": {danger: LOW, cost_usd: 3}
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 10}
  - {name: agent-minute-calls, scope: agent, window: minute, max_calls: 5}
  - {name: org-day-usd, scope: org, window: day, max_usd: 100}
  - {name: gpu-hour, scope: agent, window: hour, tool: "cli:gpu-train", max_usd: 7}
)";

TEST(Budgets, ReservationsStopOverspendAndTheMessageNamesTheBudget) {
  PolicyInForce pif;
  pif.SetFile(MustLoad(kBudgetPolicy));
  BudgetLedger l;
  auto decide = [&](const std::string& rid, const std::string& tool, double cost, int64_t at,
                    const std::string& session = "s1") {
    Json req = Req("a1", tool, Json::object(), rid, session);
    if (cost > 0) req["estimated_cost_usd"] = cost;
    Json d = Decide(pif, l, DecideInput{&req, at});
    l.ApplyDecision(rid, req, d);  // as the stage does, before the next request
    return d;
  };
  // Per tool: cli:gpu-train costs at least 3 (registry), 7 an hour.
  Json d = decide("g1", "cli:gpu-train", 0, kT0);
  ASSERT_EQ(d["verdict"], "allow") << d.dump();
  EXPECT_EQ(d["reservation"]["usd"], 3.0);
  EXPECT_EQ(d["reservation"]["received_at"], FormatTime(kT0));
  EXPECT_EQ(decide("g2", "cli:gpu-train", 0, kT0 + 1)["verdict"], "allow");
  d = decide("g3", "cli:gpu-train", 0, kT0 + 2);
  ASSERT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["error_code"], "E_BUDGET_EXCEEDED");
  EXPECT_EQ(d["rule"], "budget:gpu-hour");
  const std::string msg = d["reason"];
  EXPECT_NE(msg.find("gpu-hour"), std::string::npos) << msg;
  EXPECT_NE(msg.find("spent $6.00 of $7.00"), std::string::npos) << msg;
  EXPECT_NE(msg.find("$1.00 remains"), std::string::npos) << msg;
  // Settling at a lower actual cost frees room.
  l.Apply(Completed("g1", 0.5));
  EXPECT_EQ(decide("g4", "cli:gpu-train", 0, kT0 + 3)["verdict"], "allow");
  // Session USD: 10 per session; g1 0.5 + g2 3 + g4 3 = 6.5 spent in s1.
  d = decide("e1", "echo", 4, kT0 + 4);
  EXPECT_EQ(d["rule"], "budget:session-usd") << d.dump();
  EXPECT_EQ(decide("e2", "echo", 4, kT0 + 4, "s2")["verdict"], "allow")
      << "another session has its own budget";
  // Calls per minute: 5 (g1, g2, g4, e2 counted; g3 and e1 were denied).
  EXPECT_EQ(decide("e3", "echo", 0, kT0 + 5)["verdict"], "allow");
  d = decide("e4", "echo", 0, kT0 + 6);
  EXPECT_EQ(d["rule"], "budget:agent-minute-calls") << d.dump();
  EXPECT_NE(d["reason"].get<std::string>().find("5 of 5 calls used"), std::string::npos) << d["reason"];
  // The window rolls: a minute later the calls are free again.
  EXPECT_EQ(decide("e5", "echo", 0, kT0 + 61 * kSec)["verdict"], "allow");
  // Re-deciding a request excludes its own reservation: same answer.
  Json again = Req("a1", "echo", Json::object(), "e5");
  EXPECT_EQ(Decide(pif, l, DecideInput{&again, kT0 + 61 * kSec})["verdict"], "allow");
}

// ---------------------------------------------------------------------------
// The stage: policy versions and the ledger against a real log.
class VectorLog : public LogView {
 public:
  Status EventsOfRequest(const std::string& org, const std::string& rid,
                         std::vector<Event>* out) const override {
    out->clear();
    for (const auto& e : events) {
      if (e.org_id == org && e.request_id == rid) out->push_back(e);
    }
    return Status::Ok();
  }
  // What ingest logs for `request` (stages check a flow against it).
  void Received(const Json& request, int64_t received_at) {
    auto str = [&](const char* k) { return request.value(k, ""); };
    std::vector<Event> have;
    (void)EventsOfRequest(str("org_id"), str("request_id"), &have);
    if (!have.empty()) return;
    std::string canon;
    EXPECT_TRUE(CanonicalBytes(request, &canon).ok());
    Event e = testing::MakeEvent("request.received", str("request_id"), str("session_id"), str("agent_id"),
                                 str("org_id"), str("tool"), received_at);
    e.data = {{"request", request},
              {"args_hash", ArgsHash(request["args"])},
              {"content_hash", Sha256Hex(canon)},
              {"received_at", FormatTime(received_at)}};
    events.push_back(std::move(e));
  }
  std::vector<Event> events;
};

// The flow message decide reads for `request`; its request.received goes
// into `log` first, as ingest appends it before forwarding.
Message FlowMsg(const Json& request, int64_t received_at, VectorLog& log) {
  log.Received(request, received_at);
  Flow f;
  f.request = request;
  f.received_at = FormatTime(received_at);
  f.args_hash = ArgsHash(request["args"]);
  Message m;
  m.topic = "tollgate.decide";
  m.key = request["agent_id"];
  m.value = f.ToJson().dump();
  return m;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(DecideStage, FailsClosedUntilAPolicyIsInForceThenReloadsEdits) {
  TempDir dir;
  const std::string path = dir.sub("policy.yaml");
  WriteFile(path, "allow: [\"builtin:echo\"]\n");
  DecideStage stage(DecideConfig{Topics{}, path});
  VectorLog log;
  Json req = Req("a1", "echo", Json::object(), "r1");
  StageResult r = stage.Process(FlowMsg(req, kT0, log), {kT0, "i/d/0/1"}, log);
  EXPECT_EQ(r.error.code(), "E_NO_POLICY");
  EXPECT_TRUE(r.events.empty() && r.outputs.empty());

  StageResult t = stage.Tick({kT0, ""}, log);
  ASSERT_EQ(t.events.size(), 1u);
  const Event pu = t.events[0];
  EXPECT_EQ(pu.type, "policy.updated");
  EXPECT_EQ(pu.data["tier"], "file");
  EXPECT_EQ(pu.data["source"], path);
  EXPECT_TRUE(ValidateEnvelope(pu).ok()) << ValidateEnvelope(pu).ToString();
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("event_data.policy.updated", pu.data).ok());
  EXPECT_FALSE(stage.policy().has_policy()) << "in force only once appended";
  stage.OnAppended({pu});
  EXPECT_TRUE(stage.policy().has_policy());
  EXPECT_TRUE(stage.Tick({kT0, ""}, log).events.empty()) << "unchanged file: nothing new";

  r = stage.Process(FlowMsg(req, kT0, log), {kT0, "i/d/0/1"}, log);
  ASSERT_TRUE(r.error.ok());
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].data["verdict"], "allow");
  const std::string v1 = r.events[0].data["policy_version"];

  // A bad edit is refused, once into the log; the policy in force stays.
  WriteFile(path, "allow: [\"builtin:echo\"\n");
  t = stage.Tick({kT0, ""}, log);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].type, "policy.refused");
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("event_data.policy.refused", t.events[0].data).ok());
  EXPECT_TRUE(stage.Tick({kT0, ""}, log).events.empty()) << "refused once";
  EXPECT_EQ(stage.policy().version(), v1);

  // A good edit comes into force through its event.
  WriteFile(path, "deny: [\"builtin:echo\"]\n");
  t = stage.Tick({kT0 + 1, ""}, log);
  ASSERT_EQ(t.events.size(), 1u);
  stage.OnAppended(t.events);
  Json req2 = Req("a1", "echo", Json::object(), "r2");
  r = stage.Process(FlowMsg(req2, kT0, log), {kT0, "i/d/0/2"}, log);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].data["verdict"], "deny");
  EXPECT_NE(r.events[0].data["policy_version"], v1);
}

TEST(DecideStage, ConcurrentRequestsInOneBatchCannotOverspend) {
  DecideStage stage(DecideConfig{});
  stage.UsePolicy(
      MustLoad("allow: [\"*:*\"]\nbudgets:\n  - {name: cap, scope: agent, window: day, max_usd: 10}\n"));
  VectorLog log;
  int allowed = 0;
  for (int i = 0; i < 5; ++i) {
    Json req = Req("a1", "echo", Json::object(), "c" + std::to_string(i));
    req["estimated_cost_usd"] = 4;
    // The log does not have the earlier decisions yet (one batch): the
    // stage's own reservations must still count.
    StageResult r = stage.Process(FlowMsg(req, kT0 + i, log), {kT0, "i/d/0/" + std::to_string(i)}, log);
    ASSERT_EQ(r.events.size(), 1u);
    allowed += r.events[0].data["verdict"] == "allow";
  }
  EXPECT_EQ(allowed, 2);
}

TEST(DecideStage, SameRequestSameReceivedAtSameDecisionWhateverTheClock) {
  DecideStage stage(DecideConfig{});
  stage.UsePolicy(MustLoad(kPolicyNoOrgAllow));
  VectorLog log;
  Json req = Req("a", "write_file", {{"path", "x"}}, "d1");
  StageResult a = stage.Process(FlowMsg(req, kT0, log), {kT0 + 5 * kSec, "i/d/0/1"}, log);
  StageResult b = stage.Process(FlowMsg(req, kT0, log), {kT0 + 5000 * kSec, "i/d/0/1"}, log);
  ASSERT_EQ(a.events.size(), 1u);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(a.events[0].data, b.events[0].data);
}

// The ledger and policy folded from a real RocksDB log equal those kept
// live by the listener; a restart from the snapshot equals a full fold; a
// corrupt snapshot falls back to the full fold.
TEST(DecideStage, RebuildFromARealLogWithSnapshotEqualsTheLiveState) {
  TempDir dir;
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(EventLog::Open(dir.sub("log"), LogOptions{}, &log).ok());
  LogSink sink(*log);
  DecideStage live(DecideConfig{});
  sink.AddListener([&](const std::vector<Event>& ev) { live.OnAppended(ev); });
  auto append = [&](std::vector<Event> events) {
    std::vector<EventSink::Appended> res;
    sink.AppendAll(std::move(events), &res);
    for (auto& x : res) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  };
  PolicyPtr p = MustLoad(kBudgetPolicy);
  append({PolicyUpdatedEvent(*p, kT0)});
  auto decision = [&](const std::string& rid, double usd, int64_t at) {
    Event e = testing::MakeEvent("decision.made", rid, "s1", "a1", "o1", "echo", at);
    e.data = {{"verdict", "allow"},
              {"reason", "r"},
              {"rule", "x"},
              {"danger_level", "SAFE"},
              {"policy_version", p->version()},
              {"reservation", {{"usd", usd}, {"received_at", FormatTime(at)}}}};
    return e;
  };
  append({decision("q1", 1, kT0), decision("q2", 2, kT0 + kSec)});
  append({Completed("q1", 0.25)});
  append({decision("q3", 3, kT0 + 2 * kSec)});
  append({testing::MakeEvent("approval.expired", "q3")});
  append({decision("q1", 1, kT0)});  // a duplicate append: listener sees it again

  auto read = [&](uint64_t seq, Event* e) { return log->store().ReadEvent(seq, e); };
  const std::string snap = dir.sub("decide-ledger.snapshot");
  DecideStage first(DecideConfig{});
  bool used = true;
  ASSERT_TRUE(first.Rebuild(log->head_seq(), read, snap, &used).ok());
  EXPECT_FALSE(used) << "no snapshot yet";
  EXPECT_TRUE(first.ledger() == live.ledger());
  EXPECT_EQ(first.policy().version(), p->version());
  EXPECT_EQ(first.ledger()
                .Sum(BudgetLedger::Scope::kAgent, "o1", "a1", "", "", INT64_MIN, kT0 + 9 * kSec, "")
                .micros,
            2'250'000);

  // More events after the snapshot, then restart from it.
  append({decision("q4", 4, kT0 + 3 * kSec)});
  append({Completed("q4", 1.5)});
  DecideStage second(DecideConfig{});
  ASSERT_TRUE(second.Rebuild(log->head_seq(), read, snap, &used).ok());
  EXPECT_TRUE(used);
  DecideStage full(DecideConfig{});
  ASSERT_TRUE(full.Rebuild(log->head_seq(), read, "", nullptr).ok());
  EXPECT_TRUE(second.ledger() == full.ledger());
  EXPECT_TRUE(second.ledger() == live.ledger());
  EXPECT_EQ(second.policy().version(), full.policy().version());

  // Corrupt snapshot: refused, full fold, same state.
  {
    std::fstream f(snap, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('#');
  }
  DecideStage third(DecideConfig{});
  ASSERT_TRUE(third.Rebuild(log->head_seq(), read, snap, &used).ok());
  EXPECT_FALSE(used);
  EXPECT_TRUE(third.ledger() == full.ledger());
  // A stale snapshot (covering more than the log has) is refused too.
  DecideStage fourth(DecideConfig{});
  ASSERT_TRUE(fourth.Rebuild(3, read, snap, &used).ok());  // third rewrote it at head
  EXPECT_FALSE(used);
}

// Tick refreshes the snapshot while the stage runs. Listeners of different
// stages may deliver groups out of seq order, so a snapshot can claim a seq
// whose predecessors it has not all seen; the restart's refold margin puts
// the missing group back.
TEST(DecideStage, PeriodicSnapshotWithAnOutOfOrderGroupRebuildsExactly) {
  TempDir dir;
  std::vector<Event> log;  // log[i] has seq i + 1
  for (int i = 0; i < 1500; ++i) {
    const std::string rid = "p" + std::to_string(i);
    Event e = testing::MakeEvent(i % 2 ? "execution.completed" : "decision.made",
                                 i % 2 ? "p" + std::to_string(i - 1) : rid);
    e.data = i % 2 ? Json{{"cost_usd", 0.5}}
                   : Json{{"verdict", "allow"},
                          {"reservation", {{"usd", 1}, {"received_at", FormatTime(kT0 + i)}}}};
    e.seq = i + 1;
    log.push_back(e);
  }
  auto read = [&](uint64_t seq, Event* e) {
    if (seq == 0 || seq > log.size()) return Status::Error("E_NOT_FOUND", "no such seq");
    *e = log[seq - 1];
    return Status::Ok();
  };
  const std::string snap = dir.sub("decide-ledger.snapshot");
  DecideStage live(DecideConfig{});
  ASSERT_TRUE(live.Rebuild(0, read, snap).ok());
  std::vector<Event> late;
  for (const Event& e : log) {
    if (e.seq == 1099 || e.seq == 1100)
      late.push_back(e);  // a request whose group's listener runs late
    else
      live.OnAppended({e});
  }
  live.Tick({kT0 + 301 * kSec, ""}, VectorLog());  // snapshot now: covers seq 1500, lacks 1099-1100
  live.OnAppended(late);

  DecideStage restarted(DecideConfig{});
  bool used = false;
  ASSERT_TRUE(restarted.Rebuild(log.size(), read, snap, &used).ok());
  EXPECT_TRUE(used);
  DecideStage full(DecideConfig{});
  ASSERT_TRUE(full.Rebuild(log.size(), read, "").ok());
  EXPECT_TRUE(restarted.ledger() == full.ledger());
  EXPECT_TRUE(live.ledger() == full.ledger());
  const BudgetLedger restored = restarted.ledger();  // a copy: Find points into it
  const BudgetEntry* e = restored.Find("o1", "p1098");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, BudgetEntry::State::kSettled) << "the late group's settlement is in";
}

}  // namespace
}  // namespace tollgate
