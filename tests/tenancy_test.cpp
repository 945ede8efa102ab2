// Tenancy (issue 28): an agent entry, a token identity and a /metrics
// series are each one org's. Another org's agent of the same id gets none
// of an agent entry (its alias and the secret header it sends); two orgs may
// both have an `a1` token; an org's scraper sees its own series only; and
// what agents make up (tool names) never grows /metrics without bound.
// Real parts: the policy engine and execute stage on a loopback server, the
// credential registry, the metrics fold and renderer, the deployment's tool
// catalog over a real tools directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "api/metrics.h"
#include "api/tokens.h"
#include "core/credentials.h"
#include "core/sha256.h"
#include "deploy/observability.h"
#include "execute/invocation_check.h"
#include "tests/http_pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::HttpPipelineTest;
using testing::RecordingServer;
using testing::TempDir;

// ---------------------------------------------------------------------------
// Agent entries are org-qualified.

TEST(AgentEntries, ATopLevelEntryFromTheLogIsRefusedTooNamingItsPlace) {
  PolicyPtr p;
  Status s = LoadPolicyJson({{"agents", {{"a1", {{"mode", "restrict"}}}}}}, "log", &p);
  EXPECT_EQ(s.code(), "E_POLICY_INVALID");
  EXPECT_EQ(s.message().rfind("at /agents/a1: ", 0), 0u) << "no line in JSON: the pointer; " << s.message();
  EXPECT_NE(s.message().find("/agents/a1: an agent entry belongs to one org"), std::string::npos)
      << s.message();
  EXPECT_TRUE(LoadPolicyJson({{"agents", Json::object()}}, "log", &p).ok())
      << "an empty agents map binds nothing";
}

class AgentAliasTenancy : public HttpPipelineTest {
 protected:
  void SetUp() override { setenv("TOLLGATE_TEST_TENANT_SECRET", "deployment-secret-9", 1); }
};

// The report: org o2 registers its own `support`; it must get
// neither o1's support's rules nor its alias, nor the header that alias sends.
TEST_F(AgentAliasTenancy, AnotherOrgsAgentOfTheSameIdGetsNeitherTheEntryNorItsAliasNorItsSecretHeader) {
  RecordingServer s;
  Load(
      "mode: ask\n"
      "execute:\n  network:\n    allow_cidrs: [127.0.0.0/8]\n"
      "orgs:\n"
      "  o1:\n"
      "    agents:\n"
      "      support:\n"
      "        rules: [{tools: create_ticket, verdict: allow}]\n"
      "        http_request:\n"
      "          base_url: \"" +
      s.origin() +
      "/api/\"\n"
      "          aliases:\n"
      "            create_ticket:\n"
      "              method: POST\n"
      "              url: \"tickets\"\n"
      "              headers: {Authorization: \"Bearer ${env:TOLLGATE_TEST_TENANT_SECRET}\"}\n");
  tool_ = "create_ticket";
  const Json args{{"title", "t"}};
  // o1's support: allowed by its rule, sent with the header.
  Json mine = Decide("support", "m1", args);
  ASSERT_EQ(mine["verdict"], "allow") << mine.dump();
  ASSERT_TRUE(Execute("support", "m1", args, mine).value("success", false));
  ASSERT_EQ(s.targets().size(), 1u);
  EXPECT_EQ(s.last_headers().find("Authorization")->second, "Bearer deployment-secret-9");

  // o2's support: no such tool for it at decide.
  org_ = "o2";
  Json theirs = Decide("support", "t1", args);
  EXPECT_EQ(theirs["verdict"], "deny") << theirs.dump();
  EXPECT_EQ(theirs["rule"], "registry:unknown-tool");
  // Nor at execute, even with o1's allowing decision copied onto its own request.
  Json copied = mine;
  Json r = Execute("support", "t2", args, copied);
  EXPECT_FALSE(r.value("success", true)) << r.dump();
  ExecutePolicy ep;
  ASSERT_TRUE(ExecutePolicyFromJson(pif_.file()->doc(), dir_.path(), &ep).ok());
  const ResolvedCall call = ResolveCall(Request("support", "t3", args), ep);
  EXPECT_EQ(call.tool, "create_ticket") << "o2's call is no alias: nothing to expand, no header";
  EXPECT_EQ(call.alias, nullptr);
  EXPECT_EQ(s.targets().size(), 1u) << "nothing more reached the server";
}

// ---------------------------------------------------------------------------
// Token identities are per org.

Json TokenRequest(const std::string& org, const std::string& identity, const std::string& role = "approver") {
  return {{"kind", "token"}, {"org_id", org}, {"identity", identity}, {"roles", {role}}};
}

// Adds a token credential to `reg` as the API does; its token in *token.
Status AddTokenTo(CredentialRegistry& reg, const Json& request, std::string* token = nullptr) {
  const std::string t = NewToken();
  Credential c;
  Status s = NewCredential(request, "admin", t, reg, &c);
  if (!s.ok()) return s;
  reg.Apply(CredentialAddedEvent(c, c.added_us));
  if (token != nullptr) *token = t;
  return s;
}

TEST(TokenIdentities, TwoOrgsMayBothHaveAnA1AndEachTokenIsItsOwnOrgs) {
  CredentialRegistry reg;
  std::string t1, t2;
  ASSERT_TRUE(AddTokenTo(reg, TokenRequest("o1", "a1", "agent"), &t1).ok());
  Status s = AddTokenTo(reg, TokenRequest("o2", "a1", "agent"), &t2);
  ASSERT_TRUE(s.ok()) << "o2 may name its agent a1 too: " << s.ToString();
  EXPECT_TRUE(AddTokenTo(reg, TokenRequest("o1", "a1", "agent")).ok())
      << "a second token of the same identity";
  Principal p1, p2;
  ASSERT_TRUE(BearerPrincipal(&reg, TokenStore(), "Bearer " + t1, &p1));
  ASSERT_TRUE(BearerPrincipal(&reg, TokenStore(), "Bearer " + t2, &p2));
  EXPECT_EQ(p1.org_id, "o1");
  EXPECT_EQ(p2.org_id, "o2");
  EXPECT_EQ(p1.identity, p2.identity);
  EXPECT_FALSE(p2.InOrg("o1")) << "same name, another identity: it acts in its own org only";
}

TEST(TokenIdentities, ADeploymentWideNameIsNoOrgsAndNoOrgsNameIsDeploymentWide) {
  CredentialRegistry reg;
  ASSERT_TRUE(AddTokenTo(reg, TokenRequest("*", "admin", "admin")).ok());
  ASSERT_TRUE(AddTokenTo(reg, TokenRequest("o1", "alice")).ok());
  Status s = AddTokenTo(reg, TokenRequest("o2", "admin", "admin"));
  EXPECT_EQ(s.code(), errc::kConflict) << "an org's 'admin' would be read as the deployment's";
  EXPECT_EQ(s.message().find("o1"), std::string::npos) << "names no other tenant: " << s.message();
  s = AddTokenTo(reg, TokenRequest("*", "alice", "admin"));
  EXPECT_EQ(s.code(), errc::kConflict) << "a deployment-wide alice would share o1's alice's name in o1";
  EXPECT_TRUE(AddTokenTo(reg, TokenRequest("*", "admin", "operator")).ok())
      << "the same deployment-wide identity";
}

TEST(TokenIdentities, ACredentialAcrossTheDeploymentWideLineInTheLogGrantsNothing) {
  CredentialRegistry reg;
  ASSERT_TRUE(AddTokenTo(reg, TokenRequest("o1", "alice")).ok());
  // As a hand-made tokens file would put it in the log: (*, alice) beside (o1, alice).
  Credential c;
  c.kind = "token";
  c.identity = "alice";
  c.org_id = "*";
  c.roles = {"admin"};
  const std::string token = NewToken();
  c.token_sha256 = Sha256Hex(token);
  c.key_id = KeyIdOfToken(c.token_sha256);
  reg.Apply(CredentialAddedEvent(c, NowMicros()));
  Principal p;
  EXPECT_FALSE(BearerPrincipal(&reg, TokenStore(), "Bearer " + token, &p));
}

TEST(TokenIdentities, ATokensFileWithANameOnBothSidesOfTheDeploymentWideLineIsRefused) {
  TempDir dir;
  const std::string path = dir.sub("tokens.json");
  const Json both{
      {"tokens",
       {{{"token_sha256", std::string(64, 'a')}, {"identity", "ops"}, {"org_id", "*"}, {"roles", {"admin"}}},
        {{"token_sha256", std::string(64, 'b')},
         {"identity", "ops"},
         {"org_id", "o1"},
         {"roles", {"admin"}}}}}};
  std::ofstream(path) << both.dump();
  TokenStore store;
  Status s = TokenStore::Load(path, &store);
  EXPECT_EQ(s.code(), errc::kSchemaViolation) << s.ToString();
  EXPECT_NE(s.message().find("identity 'ops'"), std::string::npos) << s.message();
  const Json orgs{
      {"tokens",
       {{{"token_sha256", std::string(64, 'a')}, {"identity", "a1"}, {"org_id", "o1"}, {"roles", {"agent"}}},
        {{"token_sha256", std::string(64, 'b')},
         {"identity", "a1"},
         {"org_id", "o2"},
         {"roles", {"agent"}}}}}};
  std::ofstream(path, std::ios::trunc) << orgs.dump();
  EXPECT_TRUE(TokenStore::Load(path, &store).ok());
  EXPECT_EQ(store.size(), 2u);
}

// ---------------------------------------------------------------------------
// /metrics: bounded, and each org sees its own.

Event Completed(const std::string& org, const std::string& tool, const std::string& rid, bool ok = true) {
  Json result =
      ok ? Json{{"success", true}}
         : Json{{"success", false}, {"error", {{"code", "E_UPSTREAM_TOOL_ERROR"}, {"message", "no"}}}};
  return testing::MakeEvent("execution.completed", rid, "s1", "a1", org, tool, 1'790'000'000'000'000,
                            {{"result", result}, {"duration_ms", 3}, {"cost_usd", 0.5}});
}

// The samples (not comments) of `family` in `text`.
std::vector<std::string> Samples(const std::string& text, const std::string& family) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(family + "{", 0) == 0 || line.rfind(family + " ", 0) == 0) out.push_back(line);
  }
  return out;
}

std::string RandomToolName(std::mt19937_64& rng) {
  return "mcp:files/" + std::to_string(rng()) + "-" + std::to_string(rng());
}

TEST(MetricsBounds, FiveThousandCallsToRandomToolNamesAddOneSeriesWhenTheCatalogHasNoneOfThem) {
  Metrics m;
  m.SetToolCatalog([](const std::string& tool) { return tool == "mcp:files/read"; });
  std::mt19937_64 rng(28);
  std::vector<Event> batch;
  for (int i = 0; i < 5000; ++i)
    batch.push_back(Completed("o1", RandomToolName(rng), "r" + std::to_string(i), i % 2));
  batch.push_back(Completed("o1", "mcp:files/read", "known"));
  m.Observe(batch);
  const std::string text = m.Render();
  std::set<std::string> tools;
  for (const std::string& s : Samples(text, "tollgate_executions_total")) {
    std::smatch mt;
    ASSERT_TRUE(std::regex_search(s, mt, std::regex("tool=\"([^\"]*)\""))) << s;
    tools.insert(mt[1]);
  }
  EXPECT_EQ(tools, (std::set<std::string>{"other", "mcp:files/read"})) << "made-up names are `other` at once";
  // ok/error codes x {other, read}: 3 series, whatever the 5,000 names were.
  EXPECT_EQ(Samples(text, "tollgate_executions_total").size(), 3u) << text.substr(0, 2000);
  EXPECT_LE(Samples(text, "tollgate_execution_duration_seconds_count").size(), 2u);
}

// What if the catalog knows them all (an upstream server listing thousands
// of tools)? The cap holds: kMaxLabelValues names, then `other`.
TEST(MetricsBounds, EvenACatalogThatKnowsEveryNameCannotPassTheCap) {
  Metrics m;
  m.SetToolCatalog([](const std::string&) { return true; });
  std::mt19937_64 rng(7);
  std::vector<Event> batch;
  for (int i = 0; i < 5000; ++i)
    batch.push_back(Completed("o1", RandomToolName(rng), "r" + std::to_string(i)));
  m.Observe(batch);
  const std::string text = m.Render();
  const auto series = Samples(text, "tollgate_executions_total");
  EXPECT_EQ(series.size(), Metrics::kMaxLabelValues + 1) << "the cap, plus other";
  EXPECT_EQ(std::count_if(series.begin(), series.end(),
                          [](const std::string& s) { return s.find("tool=\"other\"") != std::string::npos; }),
            1);
  // Every family of the fold stays within the per-family cap whatever the orgs.
  Metrics orgs;
  std::vector<Event> many;
  for (int i = 0; i < 3000; ++i) many.push_back(Completed("org-" + std::to_string(i), "echo", "x"));
  orgs.Observe(many);
  EXPECT_EQ(Samples(orgs.Render(), "tollgate_cost_usd_total").size(), Metrics::kMaxLabelValues + 1);
}

TEST(MetricsVisibility, AnOrgsScraperSeesItsOwnSeriesAndNothingDeploymentWide) {
  Metrics m;
  const std::string tricky = "acme\",org=\"globex";  // an org id may hold quotes and commas
  m.Observe({Completed("acme", "echo", "a1"), Completed("globex", "echo", "g1"),
             Completed("globex", "echo", "g2"), Completed(tricky, "echo", "t1"),
             Completed("other", "echo", "o1")});
  m.AddCollector([](MetricsText& t) {
    t.Family("tollgate_log_head_seq", "gauge", "deployment-wide");
    t.Sample("tollgate_log_head_seq", {}, 42);
  });
  const std::string all = m.Render();
  const std::string acme = MetricsVisibleTo("acme", all);
  EXPECT_EQ(MetricsVisibleTo("*", all), all) << "a deployment-wide operator sees everything";
  std::istringstream in(acme);
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_NE(line.find("org=\"acme\""), std::string::npos) << line;
    EXPECT_EQ(line.find("globex"), std::string::npos) << line;
  }
  EXPECT_GE(samples, 3) << acme;  // events, executions, cost at least
  EXPECT_TRUE(Samples(acme, "tollgate_log_head_seq").empty()) << "deployment-wide: not an org's";
  EXPECT_EQ(Samples(acme, "tollgate_cost_usd_total"),
            (std::vector<std::string>{"tollgate_cost_usd_total{org=\"acme\"} 0.5"}));
  EXPECT_EQ(Samples(MetricsVisibleTo("globex", all), "tollgate_cost_usd_total"),
            (std::vector<std::string>{"tollgate_cost_usd_total{org=\"globex\"} 1"}));
  // The org with quotes in its id sees its own, escaped as the format says.
  EXPECT_EQ(Samples(MetricsVisibleTo(tricky, all), "tollgate_cost_usd_total"),
            (std::vector<std::string>{"tollgate_cost_usd_total{org=\"acme\\\",org=\\\"globex\"} 0.5"}));
  // The overflow bucket is nobody's: an org named "other" is counted there and sees none of it.
  EXPECT_TRUE(Samples(MetricsVisibleTo("other", all), "tollgate_cost_usd_total").empty());
  EXPECT_NE(all.find("tollgate_cost_usd_total{org=\"other\"} 0.5"), std::string::npos) << all;
}

// The deployment's catalog: the policy's aliases and tools, a CLI tool in
// the tools directory; a name an agent made up is not in it.
TEST(MetricsCatalog, TheDeploymentsCatalogHoldsThePolicysAliasesAndTheCliToolsAndNothingMadeUp) {
  TempDir dir;
  const std::string tools = dir.sub("tools");
  std::filesystem::create_directories(tools + "/report");
  std::ofstream(tools + "/report/run") << "#!/bin/sh\necho '{\"success\":true}'\n";
  std::filesystem::permissions(tools + "/report/run", std::filesystem::perms(0755));
  std::ofstream(tools + "/report/README.md") << "A report.\n";
  const std::string yaml =
      "execute:\n  tools_dir: " + tools +
      "\ntools:\n  \"cli:gpu*\": {danger: HIGH}\n  mcp__files__read: {danger: LOW}\n"
      "orgs:\n  o1:\n    agents:\n      support:\n        http_request:\n"
      "          aliases:\n            create_ticket: {method: POST, url: \"https://t.example/x\"}\n";
  std::ofstream(dir.sub("policy.yaml")) << yaml;
  PolicyPtr p;
  ASSERT_TRUE(LoadPolicyFile(dir.sub("policy.yaml"), &p).ok());
  PolicyInForce pif;
  pif.SetFile(p);
  Metrics::ToolCatalog known =
      DeploymentToolCatalog([pif] { return pif; }, dir.sub("policy.yaml"), dir.path());
  EXPECT_TRUE(known("create_ticket"));
  EXPECT_TRUE(known("cli:report"));
  EXPECT_TRUE(known("mcp:files/read"));
  EXPECT_FALSE(known("cli:gpu*")) << "a glob names no one tool";
  EXPECT_FALSE(known("mcp:files/3141592653"));
  EXPECT_FALSE(known("cli:nope"));
}

}  // namespace
}  // namespace tollgate
