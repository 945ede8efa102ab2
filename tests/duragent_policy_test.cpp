// Duragent's policy files (docs/policy.md, "Duragent policy files"): the
// seed's example policy loaded as written, its three modes and pattern
// table through decide's pure engine, the workspace layout and its merge
// table, agent.yaml's tools, the watch, and the notify deliveries.
#include "decide/duragent_policy.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "decide/decide_stage.h"
#include "decide/policy_compiler.h"
#include "decide/policy_engine.h"
#include "decide/policy_watch.h"
#include "deploy/duragent_local_rules.h"
#include "deploy/notify_deliveries.h"
#include "deploy/stage_service.h"
#include "execute/config.h"
#include "runtime/event_follower.h"
#include "runtime/kafka_bus.h"
#include "test_util.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'795'000'000'000'000;

// The seed's example policy, verbatim.
const char* const kSeedPolicy = R"(# policy.yaml
apiVersion: duragent/v1alpha1
kind: Policy

mode: ask

deny:
  - "bash:rm -rf /*"
  - "bash:*sudo*"
  - "*:*password*"

allow:
  - "bash:cargo *"
  - "bash:git *"
  - "mcp:github:*"

notify:
  enabled: true
  patterns:
    - "bash:git push*"
  deliveries:
    - type: log
    - type: webhook
      url: https://hooks.slack.com/services/...
)";

// The seed's policy with another mode, and an upstream MCP server named
// github so that mcp:github/... is a known tool (no traffic: never called).
std::string SeedWithMode(const std::string& mode) {
  std::string y = kSeedPolicy;
  y.replace(y.find("mode: ask"), 9, "mode: " + mode);
  return y + "execute:\n  mcp_servers:\n    github: {url: \"http://127.0.0.1:9/mcp\"}\n";
}

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

struct Engine {
  PolicyInForce pif;
  BudgetLedger ledger;

  explicit Engine(PolicyPtr p) { pif.SetFile(std::move(p)); }

  Decision Decide(const std::string& tool, Json args, const std::string& agent = "a1",
                  const std::string& org = "default") {
    Json req{{"request_id", "r1"}, {"org_id", org}, {"agent_id", agent},
             {"session_id", "s1"}, {"tool", tool},  {"args", std::move(args)}};
    DecideInput in;
    in.request = &req;
    in.received_at_us = kT0;
    Decision d;
    DecideInto(pif, ledger, in, &d);
    return d;
  }
  std::string Bash(const std::string& line, const std::string& agent = "a1") {
    return Decide("bash", {{"command", line}}, agent).verdict;
  }
};

PolicyPtr LoadYaml(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "policy.yaml", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

PolicyPtr LoadDir(const std::string& dir) {
  PolicyPtr p;
  Status s = LoadPolicyFile(dir, &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

// ---------------------------------------------------------------------------
// The file.
TEST(DuragentPolicyFile, TheSeedsExampleLoadsAsWrittenAndKeepsItsHeader) {
  PolicyPtr p = LoadYaml(kSeedPolicy);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->doc()["apiVersion"], "duragent/v1alpha1");
  EXPECT_EQ(p->doc()["kind"], "Policy");
  EXPECT_EQ(p->doc()["notify"]["deliveries"][1]["url"], "https://hooks.slack.com/services/...");
  EXPECT_TRUE(LoadYaml("apiVersion: tollgate/v1\nkind: Policy\nmode: ask\n"));
}

TEST(DuragentPolicyFile, AnotherKindOrApiVersionIsRefusedWithItsLine) {
  PolicyPtr p;
  Status s = LoadPolicyYaml("apiVersion: duragent/v1alpha1\nkind: Agent\n", "p.yaml", &p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), "E_POLICY_INVALID");
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  s = LoadPolicyYaml("mode: ask\napiVersion: duragent/v9\nkind: Policy\n", "p.yaml", &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
}

TEST(DuragentPolicyFile, AWebhookSecretMayOnlyBeAnEnvReference) {
  PolicyPtr p;
  const std::string head = "apiVersion: duragent/v1alpha1\nkind: Policy\nnotify:\n  deliveries:\n";
  EXPECT_FALSE(
      LoadPolicyYaml(head + "    - {type: webhook, url: \"http://127.0.0.1:1/\", secret: hunter2}\n", "p", &p)
          .ok());
  EXPECT_TRUE(LoadPolicyYaml(
                  head + "    - {type: webhook, url: \"http://127.0.0.1:1/\", secret: \"${env:HOOK_KEY}\"}\n",
                  "p", &p)
                  .ok());
  Status s = LoadPolicyYaml(head + "    - {type: webhook}\n", "p", &p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs a url"), std::string::npos) << s.message();
}

TEST(DuragentPolicyFile, DisabledNotifyAnnotatesNothing) {
  Engine on(LoadYaml(SeedWithMode("ask")));
  EXPECT_EQ(on.Decide("bash", {{"command", "git push origin main"}}).notify,
            std::vector<std::string>{"bash:git push*"});
  std::string y = SeedWithMode("ask");
  y.replace(y.find("enabled: true"), 13, "enabled: false");
  Engine off(LoadYaml(y));
  EXPECT_TRUE(off.Decide("bash", {{"command", "git push origin main"}}).notify.empty());
}

// ---------------------------------------------------------------------------
// The three modes of the seed's table, with the seed's example policy.
TEST(DuragentModes, AskBlocksTheDenyListAllowsTheAllowListAndAsksForAnythingElse) {
  Engine e(LoadYaml(SeedWithMode("ask")));
  EXPECT_EQ(e.Bash("rm -rf /tmp/x"), "deny");
  EXPECT_EQ(e.Bash("sudo ls"), "deny");
  EXPECT_EQ(e.Decide("read_file", {{"path", "password.txt"}}).verdict, "deny");
  EXPECT_EQ(e.Bash("cargo test"), "allow");
  EXPECT_EQ(e.Bash("git status"), "allow");
  EXPECT_EQ(e.Bash("git status | head"), "allow");
  EXPECT_EQ(e.Bash("git status; curl x"), "ask");
  EXPECT_EQ(e.Decide("mcp:github/create_issue", Json::object()).verdict, "allow");
  // Anything else asks, whatever its danger: echo is SAFE and read-only.
  const Decision echo = e.Decide("echo", {{"text", "hi"}});
  EXPECT_EQ(echo.verdict, "ask");
  EXPECT_EQ(echo.rule, "approval_threshold");
  EXPECT_EQ(e.Decide("web", {{"action", "search"}, {"query", "x"}}).verdict, "ask");
  EXPECT_EQ(e.Bash("ls"), "ask");
}

TEST(DuragentModes, RestrictAllowsOnlyTheAllowList) {
  Engine e(LoadYaml(SeedWithMode("restrict")));
  EXPECT_EQ(e.Bash("sudo ls"), "deny");
  EXPECT_EQ(e.Bash("cargo build"), "allow");
  EXPECT_EQ(e.Bash("git status | head"), "allow");
  EXPECT_EQ(e.Bash("git status; curl x"), "deny");
  EXPECT_EQ(e.Decide("mcp:github/list_repos", Json::object()).verdict, "allow");
  EXPECT_EQ(e.Decide("echo", {{"text", "hi"}}).verdict, "deny");
  EXPECT_EQ(e.Bash("ls"), "deny");
}

TEST(DuragentModes, DangerousBlocksOnlyTheDenyList) {
  Engine e(LoadYaml(SeedWithMode("dangerous")));
  EXPECT_EQ(e.Bash("sudo ls"), "deny");
  EXPECT_EQ(e.Decide("read_file", {{"path", "my-password"}}).verdict, "deny");
  EXPECT_EQ(e.Bash("ls"), "allow");
  EXPECT_EQ(e.Bash("git status; curl x"), "allow");
  EXPECT_EQ(e.Decide("echo", {{"text", "hi"}}).verdict, "allow");
  EXPECT_EQ(e.Decide("delete_file", {{"path", "x"}}).verdict, "allow");
}

TEST(DuragentModes, AFileThatSetsTheThresholdKeepsIt) {
  std::string y = SeedWithMode("ask") + "approval_threshold: HIGH\n";
  Engine e(LoadYaml(y));
  EXPECT_EQ(e.Decide("echo", {{"text", "hi"}}).verdict, "allow");  // read-only, below HIGH
  EXPECT_EQ(e.Bash("ls"), "ask");
}

TEST(DuragentModes, AFileWithoutModeIsDangerousAsDuragentsDefault) {
  Engine e(LoadYaml("apiVersion: duragent/v1alpha1\nkind: Policy\ndeny: [\"bash:*sudo*\"]\n"));
  EXPECT_EQ(e.Bash("ls"), "allow");
  EXPECT_EQ(e.Bash("sudo ls"), "deny");
}

// ---------------------------------------------------------------------------
// The seed's pattern table.
TEST(DuragentPatterns, EachPatternOfTheSeedsTableMatchesWhatItSays) {
  Engine e(LoadYaml(R"(apiVersion: duragent/v1alpha1
kind: Policy
mode: restrict
deny: ["*:*secret*", "builtin:echo:loud"]
allow:
  - "builtin:web:search"
  - "builtin:schedule:*"
  - "cli:deploy*"
  - "cli:code-search"
  - "mcp:github:*"
  - "builtin:echo"
  - "builtin:memory:recall"
execute:
  mcp_servers:
    github: {url: "http://127.0.0.1:9/mcp"}
)"));
  auto call = [&](const std::string& tool, const std::string& action, Json args = Json::object()) {
    if (!action.empty()) args["action"] = action;
    return e.Decide(tool, args);
  };
  EXPECT_EQ(call("web", "search", {{"query", "x"}}).verdict, "allow");
  EXPECT_EQ(call("web", "search", {{"query", "x"}}).invocation, "builtin:web:search");
  EXPECT_EQ(call("web", "fetch", {{"url", "https://example.com/"}}).verdict, "deny");
  EXPECT_EQ(call("schedule", "create").verdict, "allow");
  EXPECT_EQ(call("schedule", "cancel").verdict, "allow");
  EXPECT_EQ(call("memory", "recall").verdict, "allow");
  EXPECT_EQ(call("memory", "remember").verdict, "deny");
  EXPECT_EQ(e.Decide("cli:deploy-prod", Json::object()).verdict, "allow");
  EXPECT_EQ(e.Decide("cli:code-search", Json::object()).verdict, "allow");
  EXPECT_EQ(e.Decide("cli:build", Json::object()).verdict, "deny");
  EXPECT_EQ(e.Decide("mcp:github/create_issue", Json::object()).verdict, "allow");
  EXPECT_EQ(e.Decide("echo", {{"text", "hi"}}).verdict, "allow");
  const Decision loud = call("echo", "loud", {{"text", "hi"}});
  EXPECT_EQ(loud.verdict, "deny");
  EXPECT_EQ(loud.rule, "org.deny:builtin:echo:loud");
  // *:*secret* in any tool type.
  EXPECT_EQ(e.Decide("cli:deploy-secret", Json::object()).verdict, "deny");
  EXPECT_EQ(call("web", "search", {{"query", "x"}}).verdict, "allow");
  EXPECT_EQ(e.Decide("read_file", {{"path", "notes/secret.txt"}}).verdict, "deny");

  Engine web_all(
      LoadYaml("apiVersion: duragent/v1alpha1\nkind: Policy\nmode: restrict\nallow: [\"builtin:web:*\"]\n"));
  EXPECT_EQ(web_all.Decide("web", {{"action", "fetch"}, {"url", "https://example.com/"}}).verdict, "allow");
  EXPECT_EQ(web_all.Decide("web", {{"action", "search"}, {"query", "x"}}).verdict, "allow");
  EXPECT_EQ(web_all.Decide("schedule", {{"action", "list"}}).verdict, "deny");
}

// ---------------------------------------------------------------------------
// The workspace layout.
struct Layout {
  TempDir tmp;
  std::string dir() const { return tmp.path(); }
  void Workspace(const std::string& y) const { Write(dir() + "/.duragent/policy.yaml", y); }
  void Agent(const std::string& name, const std::string& file, const std::string& y) const {
    Write(dir() + "/agents/" + name + "/" + file, y);
  }
};

TEST(DuragentLayout, TheSeedsExampleAsWorkspaceAndAsAnAgentsPolicyDecidesAlike) {
  Layout ws;
  ws.Workspace(kSeedPolicy);
  Layout ag;
  ag.Agent("a1", "policy.yaml", kSeedPolicy);
  for (const Layout* l : {&ws, &ag}) {
    Engine e(LoadDir(l->dir()));
    EXPECT_EQ(e.Bash("sudo ls"), "deny");
    EXPECT_EQ(e.Bash("git status | head"), "allow");
    EXPECT_EQ(e.Bash("git status; curl x"), "ask");
    EXPECT_EQ(e.Decide("echo", {{"text", "hi"}}).verdict, "ask");
    EXPECT_EQ(e.Decide("bash", {{"command", "git push origin"}}).notify,
              std::vector<std::string>{"bash:git push*"});
  }
}

TEST(DuragentLayout, NoPolicyFilesAtAllIsDangerousWithNoFiltering) {
  Layout l;
  std::filesystem::create_directories(l.dir() + "/agents/a1");
  Engine e(LoadDir(l.dir()));
  EXPECT_EQ(e.Bash("rm -rf build"), "allow");
  EXPECT_EQ(e.Decide("delete_file", {{"path", "x"}}).verdict, "allow");
  EXPECT_EQ(e.pif.file()->doc()["execute"]["tools_dir"], l.dir() + "/.duragent/tools");
  EXPECT_EQ(e.pif.file()->doc()["execute"]["agents_dir"], l.dir() + "/agents");
}

TEST(DuragentLayout, MergesModeDenyAllowAndNotifyAsTheSeedsTable) {
  Layout l;
  l.Workspace(R"(apiVersion: duragent/v1alpha1
kind: Policy
mode: ask
deny: ["bash:*sudo*"]
allow: ["bash:cargo *"]
notify: {enabled: true, patterns: ["bash:git push*"], deliveries: [{type: log}]}
)");
  // a1: restrict from its base; its local adds an allow and a notify.
  l.Agent("a1", "policy.yaml", R"(apiVersion: duragent/v1alpha1
kind: Policy
mode: restrict
deny: ["cli:deploy*"]
allow: ["bash:git *", "bash:sudo *"]
notify: {patterns: ["bash:rm *"]}
)");
  l.Agent("a1", "policy.local.yaml", R"(apiVersion: duragent/v1alpha1
kind: Policy
allow: ["bash:make *"]
notify:
  patterns: ["bash:make install*"]
  deliveries: [{type: webhook, url: "http://127.0.0.1:1/hook"}]
)");
  // a2: its local's mode wins over its base's.
  l.Agent("a2", "policy.yaml", "mode: restrict\n");
  l.Agent("a2", "policy.local.yaml", "mode: dangerous\n");
  Engine e(LoadDir(l.dir()));
  // Mode: a1's base (restrict); a2's local (dangerous); a3 (no files): the workspace's (ask).
  EXPECT_EQ(e.Bash("ls", "a1"), "deny");
  EXPECT_EQ(e.Bash("ls", "a2"), "allow");
  EXPECT_EQ(e.Bash("ls", "a3"), "ask");
  // Allow: the union of the three tiers.
  EXPECT_EQ(e.Bash("cargo build", "a1"), "allow");
  EXPECT_EQ(e.Bash("git status", "a1"), "allow");
  EXPECT_EQ(e.Bash("make all", "a1"), "allow");
  EXPECT_EQ(e.Bash("make all", "a3"), "ask");
  // Deny: the union, before any allow: the agent's allow cannot lift the workspace's deny.
  EXPECT_EQ(e.Bash("sudo make", "a1"), "deny");
  EXPECT_EQ(e.Bash("sudo make", "a2"), "deny");
  EXPECT_EQ(e.Decide("cli:deploy-prod", Json::object(), "a1").verdict, "deny");
  EXPECT_EQ(e.Decide("cli:deploy-prod", Json::object(), "a2").verdict, "allow");
  // Notify: the union (workspace, base, local), deliveries included.
  EXPECT_EQ(e.Decide("bash", {{"command", "git push"}}, "a1").notify,
            std::vector<std::string>{"bash:git push*"});
  EXPECT_EQ(e.Decide("bash", {{"command", "rm -f x"}}, "a1").notify, std::vector<std::string>{"bash:rm *"});
  EXPECT_EQ(e.Decide("bash", {{"command", "make install"}}, "a1").notify,
            std::vector<std::string>{"bash:make install*"});
  const Json& doc = e.pif.file()->doc();
  const Json& a1 = doc["orgs"]["default"]["agents"]["a1"];
  EXPECT_EQ(a1["mode"], "restrict");
  EXPECT_EQ(a1["notify"]["deliveries"].size(), 1u);
  EXPECT_EQ(a1["notify"]["patterns"], Json::array({"bash:rm *", "bash:make install*"}));
  EXPECT_EQ(doc["notify"]["deliveries"][0]["type"], "log");
  // The source files' hashes are part of the document policy.updated records.
  EXPECT_EQ(doc["layout"]["files"].size(), 5u);
  EXPECT_TRUE(doc["layout"]["files"].contains("agents/a1/policy.local.yaml"));
}

TEST(DuragentLayout, TheWorkspacesOrgKeyNamesTheOrgOfItsAgents) {
  Layout l;
  l.Workspace("org: acme\nmode: ask\n");
  l.Agent("a1", "policy.yaml", "mode: restrict\n");
  Engine e(LoadDir(l.dir()));
  EXPECT_EQ(e.Decide("echo", Json::object(), "a1", "acme").verdict, "deny");
  EXPECT_EQ(e.Decide("echo", Json::object(), "a1", "other").verdict, "ask");
}

TEST(DuragentLayout, AgentYamlDeclaresGrantsAndTheCliToolsExecuteRuns) {
  Layout l;
  l.Workspace("mode: ask\n");
  l.Agent("coder", "agent.yaml", R"(apiVersion: duragent/v1alpha1
kind: Agent
metadata: {name: coder}
spec:
  tools:
    - type: builtin
      name: bash
    - type: cli
      name: code-search
      command: ./tools/code-search.sh
      description: Search codebase for patterns
      readme: ./tools/code-search/README.md
  memory: {backend: file}
)");
  Engine e(LoadDir(l.dir()));
  const Json& doc = e.pif.file()->doc();
  EXPECT_EQ(doc["orgs"]["default"]["agents"]["coder"]["tools"], Json::array({"bash", "cli:*", "memory"}));
  const Json& t = doc["execute"]["declared_tools"]["coder"]["code-search"];
  EXPECT_EQ(t["command"], l.dir() + "/agents/coder/tools/code-search.sh");
  EXPECT_EQ(t["readme"], l.dir() + "/agents/coder/tools/code-search/README.md");
  EXPECT_EQ(t["description"], "Search codebase for patterns");
  // Grants: a built-in it did not declare is denied.
  EXPECT_EQ(e.Decide("web", {{"action", "search"}}, "coder").verdict, "deny");
  EXPECT_EQ(e.Decide("cli:code-search", Json::object(), "coder").verdict, "ask");
  // Execute reads the three keys.
  ExecutePolicy ep;
  Status s = ExecutePolicyFromJson(doc, l.dir() + "/data", &ep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ep.agents_dir, l.dir() + "/agents");
  EXPECT_EQ(ep.declared_tools["coder"]["code-search"].command,
            l.dir() + "/agents/coder/tools/code-search.sh");
}

TEST(DuragentLayout, ACommandOutsideTheWorkspaceIsRefusedWithItsLine) {
  Layout l;
  l.Agent("a1", "agent.yaml",
          "spec:\n  tools:\n    - type: cli\n      name: x\n      command: ../../../etc/x\n");
  PolicyPtr p;
  Status s = LoadPolicyFile(l.dir(), &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("agents/a1/agent.yaml: line 5"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("leaves the workspace"), std::string::npos) << s.message();
}

TEST(DuragentLayout, ErrorsNameTheFileAndLine) {
  Layout l;
  l.Agent("a1", "policy.yaml", "mode: ask\ndeny: [\"bash:[x\"]\n");
  PolicyPtr p;
  Status s = LoadPolicyFile(l.dir(), &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("agents/a1/policy.yaml: line 2"), std::string::npos) << s.message();
  l.Agent("a1", "policy.yaml", "mode: ask\nexecute: {}\n");
  s = LoadPolicyFile(l.dir(), &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  l.Agent("a1", "policy.yaml", "kind: Agent\n");
  s = LoadPolicyFile(l.dir(), &p);
  EXPECT_FALSE(s.ok());
  l.Agent("a1", "policy.yaml", "");
  s = LoadPolicyFile(l.dir(), &p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("empty"), std::string::npos) << s.message();
}

TEST(DuragentLayout, TheWatchSeesAChangeInAnyFile) {
  Layout l;
  l.Workspace(kSeedPolicy);
  PolicyFileWatch watch(l.dir(), nullptr);
  PolicyInForce none;
  watch.Poll(none);
  ASSERT_TRUE(watch.policy()) << watch.error();
  const std::string v1 = watch.policy()->version();
  l.Agent("a1", "policy.local.yaml", "allow: [\"bash:ls\"]\n");
  watch.Poll(none);
  ASSERT_TRUE(watch.policy()) << watch.error();
  const std::string v2 = watch.policy()->version();
  EXPECT_NE(v1, v2);
  l.Agent("a1", "agent.yaml", "spec:\n  tools:\n    - {type: builtin, name: bash}\n");
  watch.Poll(none);
  ASSERT_TRUE(watch.policy()) << watch.error();
  EXPECT_NE(watch.policy()->version(), v2);
  l.Agent("a1", "policy.yaml", "mode: nonsense\n");
  watch.Poll(none);
  EXPECT_FALSE(watch.policy());
  EXPECT_NE(watch.error().find("agents/a1/policy.yaml"), std::string::npos) << watch.error();
}

// ---------------------------------------------------------------------------
// "Allow always" into policy.local.yaml.
TEST(DuragentAllowAlways, AGrantIsAddedToTheAgentsLocalFileAndTheWatchReloadsIt) {
  Layout l;
  l.Workspace("mode: ask\n");
  l.Agent("a1", "policy.yaml", "mode: ask\nallow: [\"bash:cargo *\"]\n");
  PolicyInForce pif;
  pif.SetFile(LoadDir(l.dir()));
  PolicyFileWatch watch(l.dir(), nullptr);
  watch.Poll(pif);
  ASSERT_TRUE(watch.policy());
  const std::string v1 = watch.policy()->version();
  Engine before(watch.policy());
  EXPECT_EQ(before.Bash("make  *x"), "ask");

  auto listener = DuragentLocalRulesListener(l.dir(), [&] { return pif; });
  Event e = testing::MakeEvent("policy.updated", "r9", "s1", "a1", "default");
  e.data = {{"tier", "agent_local"},
            {"source", "approval:r9"},
            {"org_id", "default"},
            {"agent_id", "a1"},
            {"allow", Json::array({"bash:make  \\*x"})}};
  listener({e});
  listener({e});  // idempotent
  const std::string local = l.dir() + "/agents/a1/policy.local.yaml";
  ASSERT_TRUE(std::filesystem::exists(local));
  Json doc;
  LineMap lines;
  std::ifstream in(local);
  std::stringstream ss;
  ss << in.rdbuf();
  ASSERT_TRUE(ParsePolicyYaml(ss.str(), &doc, &lines).ok());
  EXPECT_EQ(doc["apiVersion"], "duragent/v1alpha1");
  EXPECT_EQ(doc["kind"], "Policy");
  EXPECT_EQ(doc["allow"], Json::array({"bash:make  \\*x"}));
  EXPECT_EQ((std::filesystem::status(local).permissions() & std::filesystem::perms::others_write),
            std::filesystem::perms::none);

  watch.Poll(pif);
  ASSERT_TRUE(watch.policy()) << watch.error();
  EXPECT_NE(watch.policy()->version(), v1);
  Engine after(watch.policy());
  EXPECT_EQ(after.Bash("make  *x"), "allow");
  EXPECT_EQ(after.Bash("make  yx"), "ask");  // the escaped glob matches that line only

  // Another org's agent of the same name, or an agent with no directory: untouched.
  Event other = e;
  other.data["org_id"] = "acme";
  other.data["allow"] = Json::array({"bash:ls"});
  listener({other});
  other.data["org_id"] = "default";
  other.data["agent_id"] = "ghost";
  listener({other});
  EXPECT_FALSE(std::filesystem::exists(l.dir() + "/agents/ghost"));
  ss.str("");
  std::ifstream in2(local);
  ss << in2.rdbuf();
  EXPECT_EQ(ss.str().find("bash:ls"), std::string::npos);

  // A revocation takes it out again.
  Event revoke = testing::MakeEvent("policy.updated", "", "", "a1", "default");
  revoke.data = {{"tier", "agent_local"},  {"source", "revoked by admin"},
                 {"org_id", "default"},    {"agent_id", "a1"},
                 {"allow", Json::array()}, {"revoke", Json::array({"bash:make  \\*x"})}};
  listener({revoke});
  watch.Poll(pif);
  ASSERT_TRUE(watch.policy()) << watch.error();
  EXPECT_EQ(Engine(watch.policy()).Bash("make  *x"), "ask");
}

// ---------------------------------------------------------------------------
// Notify deliveries, to a loopback receiver only.
struct Receiver {
  httplib::Server srv;
  std::mutex mu;
  struct Got {
    std::string path, body, timestamp, signature, delivery;
  };
  std::vector<Got> got;
  int port = 0;
  std::thread thread;

  Receiver() {
    for (const char* path : {"/hook", "/slack"}) {
      srv.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
        std::lock_guard<std::mutex> lock(mu);
        got.push_back({req.path, req.body, req.get_header_value("X-Tollgate-Timestamp"),
                       req.get_header_value("X-Tollgate-Signature"),
                       req.get_header_value("X-Tollgate-Delivery")});
        res.status = 204;
      });
    }
    port = srv.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { srv.listen_after_bind(); });
  }
  ~Receiver() {
    srv.stop();
    thread.join();
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
  // The deliveries received about `rid`, once there are `n` (or the deadline passed).
  std::vector<Got> WaitFor(const std::string& rid, size_t n) {
    std::vector<Got> out;
    testing::WaitUntil(
        [&] {
          out.clear();
          std::lock_guard<std::mutex> lock(mu);
          for (const auto& g : got) {
            if (g.body.find("\"" + rid + "\"") != std::string::npos ||
                g.body.find("`" + rid + "`") != std::string::npos)
              out.push_back(g);
          }
          return out.size() >= n;
        },
        std::chrono::seconds(10));
    return out;
  }
  size_t total() {
    std::lock_guard<std::mutex> lock(mu);
    return got.size();
  }
};

struct NotifyRig {
  TempDir dir;
  Receiver rx;
  std::unique_ptr<EventLog> log;
  std::unique_ptr<LogSink> sink;
  std::unique_ptr<StoreLogView> view;
  PolicyInForce pif;
  std::unique_ptr<NotifyDeliveries> n;

  NotifyRig() {
    ::setenv("TG_NOTIFY_TEST_KEY", "s3cret-from-env", 1);
    pif.SetFile(LoadYaml(std::string(R"(apiVersion: duragent/v1alpha1
kind: Policy
mode: dangerous
notify:
  enabled: true
  patterns: ["bash:git push*"]
  deliveries:
    - type: log
    - type: webhook
      url: ")") + rx.url("/hook") +
                         R"("
      secret: "${env:TG_NOTIFY_TEST_KEY}"
    - type: webhook
      url: ")" + rx.url("/slack") +
                         R"("
      format: slack
)"));
    EXPECT_TRUE(EventLog::Open(dir.sub("log"), LogOptions{}, &log).ok());
    sink = std::make_unique<LogSink>(*log);
    view = std::make_unique<StoreLogView>(log->store());
    sink->AddListener([this](const std::vector<Event>& ev) {
      if (n) n->OnAppended(ev);
    });
  }
  void Start() {
    NotifyOptions o;
    o.data_dir = dir.path();
    o.default_secret = "derived-default-secret-0123456789abcdef";
    o.policy = [this] { return pif; };
    o.view = view.get();
    o.webhook.first_backoff = std::chrono::milliseconds(10);
    ASSERT_TRUE(NotifyDeliveries::Start(std::move(o), log->store(), log->head_seq(), &n).ok());
    n->SetConsoleBase("http://127.0.0.1:8080");
  }
  // One call, received, decided (with notify when `notify`) and completed.
  void Call(const std::string& rid, const std::string& line, bool notify) {
    Event rec = testing::MakeEvent("request.received", rid, "s1", "a1", "o1", "bash");
    rec.data = {{"request",
                 {{"request_id", rid},
                  {"org_id", "o1"},
                  {"agent_id", "a1"},
                  {"session_id", "s1"},
                  {"tool", "bash"},
                  {"args", {{"command", line}, {"token", "[REDACTED]"}}}}},
                {"args_hash", std::string(64, 'a')},
                {"received_at", FormatTime(kT0)}};
    Event dec = testing::MakeEvent("decision.made", rid, "s1", "a1", "o1", "bash");
    dec.data = {{"verdict", "allow"},           {"reason", "r"},
                {"rule", "mode:dangerous@org"}, {"danger_level", "HIGH"},
                {"policy_version", "file:x"},   {"invocation", "bash:" + line}};
    if (notify) dec.data["notify"] = Json::array({"bash:git push*"});
    Event done = testing::MakeEvent("execution.completed", rid, "s1", "a1", "o1", "bash");
    done.data = {
        {"result",
         {{"success", true}, {"data", {{"exit_code", 0}}}, {"error", nullptr}, {"meta", Json::object()}}},
        {"duration_ms", 3}};
    for (Event& e : std::vector<Event>{rec, dec, done}) {
      std::vector<EventSink::Appended> res;
      sink->AppendAll({e}, &res);
      for (auto& x : res) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
    }
  }
};

TEST(DuragentNotify, DeliversOnceAfterTheCallRanSignedAndSlackShaped) {
  NotifyRig rig;
  rig.Start();
  rig.Call("r1", "git push origin main", true);
  auto got = rig.rx.WaitFor("r1", 2);
  ASSERT_EQ(got.size(), 2u);
  const auto& hook = got[0].path == "/hook" ? got[0] : got[1];
  const auto& slack = got[0].path == "/hook" ? got[1] : got[0];
  // The JSON body, signed with the env secret: HMAC-SHA256(secret, ts + "." + body).
  EXPECT_EQ(hook.signature, "sha256=" + NotifySignature("s3cret-from-env", hook.timestamp, hook.body));
  EXPECT_FALSE(hook.delivery.empty());
  const Json b = Json::parse(hook.body);
  EXPECT_EQ(b["org_id"], "o1");
  EXPECT_EQ(b["agent_id"], "a1");
  EXPECT_EQ(b["session_id"], "s1");
  EXPECT_EQ(b["request_id"], "r1");
  EXPECT_EQ(b["tool"], "bash");
  EXPECT_EQ(b["invocation"], "bash:git push origin main");
  EXPECT_EQ(b["args"]["token"], "[REDACTED]");
  EXPECT_EQ(b["verdict"], "allow");
  EXPECT_EQ(b["status"], "succeeded");
  EXPECT_EQ(b["notify"], Json::array({"bash:git push*"}));
  EXPECT_EQ(b["console_url"], "http://127.0.0.1:8080/#/session/s1?request=r1");
  // Slack's shape, signed with the default secret.
  const Json sl = Json::parse(slack.body);
  ASSERT_TRUE(sl["text"].is_string());
  EXPECT_NE(sl["text"].get<std::string>().find("git push origin main"), std::string::npos);
  EXPECT_EQ(sl["blocks"][0]["type"], "section");
  EXPECT_EQ(slack.signature, "sha256=" + NotifySignature("derived-default-secret-0123456789abcdef",
                                                         slack.timestamp, slack.body));
  EXPECT_EQ(rig.n->logged.load(), 1u);

  // A call that matched no notify pattern sends nothing: r2 is queued
  // before r3, so r3's arrival proves r2 was passed over.
  rig.Call("r2", "git status", false);
  rig.Call("r3", "git push", true);
  EXPECT_EQ(rig.rx.WaitFor("r3", 2).size(), 2u);
  EXPECT_EQ(rig.rx.WaitFor("r2", 0).size(), 0u);

  // A restart sends nothing again, and delivers what completed while down.
  rig.n.reset();
  rig.Call("r4", "git push --tags", true);
  rig.Start();
  EXPECT_EQ(rig.rx.WaitFor("r4", 2).size(), 2u);
  rig.n->Drain();
  EXPECT_EQ(rig.rx.WaitFor("r1", 2).size(), 2u);
  EXPECT_EQ(rig.rx.total(), 6u);
}

TEST(DuragentNotify, AnUnsetSecretVariableSendsNothingAndSaysSo) {
  NotifyRig rig;
  ::unsetenv("TG_NOTIFY_TEST_KEY");
  rig.Start();
  rig.Call("r1", "git push", true);
  EXPECT_EQ(rig.rx.WaitFor("r1", 1).size(), 1u);  // the slack one, with the default secret
  rig.n->Drain();
  EXPECT_EQ(rig.n->webhooks_failed.load(), 1u);
}

TEST(DuragentNotify, TheDefaultSecretIsWrittenOwnerOnlyAndKept) {
  TempDir dir;
  std::string s1, s2;
  ASSERT_TRUE(NotifyDefaultSecret(dir.path(), std::string(64, 'b'), &s1).ok());
  ASSERT_TRUE(NotifyDefaultSecret(dir.path(), std::string(64, 'c'), &s2).ok());
  EXPECT_EQ(s1, std::string(64, 'b'));
  EXPECT_EQ(s2, s1);
  const auto perms = std::filesystem::status(dir.sub("keys/notify-webhook.secret")).permissions();
  EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
}

// ---------------------------------------------------------------------------
// The distributed deployment's log keeper (`tollgate stage audit`) owns the
// log there: it sends the notify deliveries and writes "allow always".
struct KeeperRig {
  TempDir dir;
  std::unique_ptr<EmbeddedBroker> broker;
  BusConfig bus;
  std::shared_ptr<const EventsKey> key;
  std::unique_ptr<Producer> producer;

  KeeperRig() {
    EXPECT_TRUE(EmbeddedBroker::Start(1, &broker).ok());
    bus.brokers = broker->bootstrap();
    for (const auto& t : bus.topics.All()) EXPECT_TRUE(broker->CreateTopic(t, PartitionsOf(bus, t)).ok());
    EXPECT_TRUE(Producer::Open(bus, "", &producer).ok());
  }
  std::unique_ptr<StageService> Keeper(const std::string& name, const std::string& policy_dir) {
    ServiceOptions o;
    o.stage = "audit";
    o.pipeline.brokers = bus.brokers;
    o.pipeline.data_dir = dir.sub(name);
    o.pipeline.policy_path = policy_dir;
    o.pipeline.http_listen = "127.0.0.1:0";
    o.follow_interval = std::chrono::milliseconds(10);
    if (key) o.deployment_key = dir.sub("k1/keys/events.key");
    std::unique_ptr<StageService> k;
    Status s = StageService::Start(o, &k);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!key) EXPECT_TRUE(EventsKey::Load(dir.sub("k1/keys/events.key"), false, &key).ok());
    return k;
  }
  // Events as a stage commits them: sealed, on the events topic.
  void Publish(const std::vector<Event>& events) {
    for (const Event& e : events) {
      Message m;
      ASSERT_TRUE(EventMessage(e, bus.topics.events(), kDefaultMaxEventBytes, *key, &m).ok());
      ASSERT_TRUE(producer->Send(m).ok());
    }
    ASSERT_TRUE(producer->Flush(std::chrono::seconds(10)).ok());
  }
  // A completed call of agent a1 in the workspace's org whose decision matched notify.
  void Call(const std::string& rid) {
    Event rec = testing::MakeEvent("request.received", rid, "s1", "a1", "default", "bash");
    rec.data = {{"request",
                 {{"request_id", rid},
                  {"org_id", "default"},
                  {"agent_id", "a1"},
                  {"session_id", "s1"},
                  {"tool", "bash"},
                  {"args", {{"command", "git push"}}}}},
                {"args_hash", std::string(64, 'a')},
                {"received_at", FormatTime(kT0)}};
    Event dec = testing::MakeEvent("decision.made", rid, "s1", "a1", "default", "bash");
    dec.data = {{"verdict", "allow"},
                {"reason", "r"},
                {"rule", "allow"},
                {"danger_level", "HIGH"},
                {"policy_version", "file:x"},
                {"invocation", "bash:git push"},
                {"notify", {"bash:git push*"}}};
    Event done = testing::MakeEvent("execution.completed", rid, "s1", "a1", "default", "bash");
    done.data = {
        {"result",
         {{"success", true}, {"data", {{"exit_code", 0}}}, {"error", nullptr}, {"meta", Json::object()}}},
        {"duration_ms", 3}};
    Publish({rec, dec, done});
  }
};

TEST(DuragentKeeper, TheLogKeeperDeliversNotifyOnceSignedAndWritesAllowAlwaysIntoTheWorkspace) {
  KeeperRig rig;
  Receiver rx;
  Layout l;
  l.Workspace(
      "apiVersion: duragent/v1alpha1\nkind: Policy\nmode: ask\nnotify:\n  patterns: [\"bash:git push*\"]\n"
      "  deliveries:\n    - type: log\n    - type: webhook\n      url: \"" +
      rx.url("/hook") + "\"\n");
  l.Agent("a1", "policy.yaml", "mode: ask\n");
  auto k1 = rig.Keeper("k1", l.dir());
  ASSERT_TRUE(k1 && k1->notify());
  // The decide process logs the workspace's policy as in force; then a call.
  rig.Publish({PolicyUpdatedEvent(*LoadDir(l.dir()), NowMicros())});
  rig.Call("r1");
  auto got = rx.WaitFor("r1", 1);
  ASSERT_EQ(got.size(), 1u);
  std::string secret;
  std::ifstream(rig.dir.sub("k1/keys/notify-webhook.secret")) >> secret;
  ASSERT_FALSE(secret.empty());
  EXPECT_EQ(got[0].signature, "sha256=" + NotifySignature(secret, got[0].timestamp, got[0].body));
  EXPECT_EQ(Json::parse(got[0].body)["request_id"], "r1");
  EXPECT_EQ(Json::parse(got[0].body)["console_url"], k1->api()->url() + "/#/session/s1?request=r1");

  // A keeper whose copy is new (read from the topic) does not send the
  // past again; a later call is sent by each keeper, under one delivery id.
  auto k2 = rig.Keeper("k2", l.dir());
  ASSERT_TRUE(k2 && k2->notify());
  rig.Call("r2");
  auto r2 = rx.WaitFor("r2", 2);
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[0].delivery, r2[1].delivery);
  k1->notify()->Drain();
  k2->notify()->Drain();
  EXPECT_EQ(rx.WaitFor("r1", 0).size(), 1u);
  EXPECT_EQ(k1->notify()->logged.load(), 2u);
  EXPECT_EQ(k2->notify()->logged.load(), 1u);
  k2.reset();

  // "Allow always" for a1, as approve commits it: the keeper writes it into
  // the agent's policy.local.yaml.
  Event grant = testing::MakeEvent("policy.updated", "r9", "s1", "a1", "default");
  grant.data = {{"tier", "agent_local"},
                {"source", "approval:r9"},
                {"org_id", "default"},
                {"agent_id", "a1"},
                {"allow", Json::array({"bash:make x"})},
                {"content_hash", std::string(64, 'c')},
                {"policy_version", "agent-rule:cccccccccccccccc"}};
  rig.Publish({grant});
  const std::string local = l.dir() + "/agents/a1/policy.local.yaml";
  std::string text;
  testing::WaitUntil(
      [&] {
        std::ifstream in(local);
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
        return text.find("bash:make x") != std::string::npos;
      },
      std::chrono::seconds(10));
  EXPECT_NE(text.find("bash:make x"), std::string::npos) << text;
  EXPECT_EQ(Engine(LoadDir(l.dir())).Bash("make x"), "allow");
}

}  // namespace
}  // namespace tollgate
