// `tollgate policy check` and `tollgate policy explain` as a user runs them
// (the real binary), including budgets read from a real log under --data.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "audit/event_log.h"
#include "decide/decide_stage.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::TempDir;

// Runs `tollgate ARGS` (stderr into stdout); returns the exit status.
int RunTollgate(const std::string& args, std::string* out) {
  testing::CommandResult r = testing::RunCommand(std::string(TOLLGATE_BIN) + " " + args + " 2>&1");
  *out = std::move(r.out);
  return r.exit_code;
}

Json LastLineJson(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return Json::parse(s.substr(s.rfind('\n') + 1), nullptr, false);
}

TEST(PolicyCli, CheckAcceptsTheDefaultAndRefusesABadFileWithItsLine) {
  std::string out;
  EXPECT_EQ(RunTollgate("policy check " TOLLGATE_SOURCE_DIR "/config/default-policy.yaml", &out), 0) << out;
  EXPECT_NE(out.find("ok (file:"), std::string::npos) << out;
  TempDir dir;
  std::ofstream(dir.sub("bad.yaml"))
      << "mode: ask\norgs:\n  o1:\n    agents:\n      a1:\n        mode: sideways\n";
  EXPECT_EQ(RunTollgate("policy check " + dir.sub("bad.yaml"), &out), 1);
  EXPECT_NE(out.find("line 6: /orgs/o1/agents/a1/mode"), std::string::npos) << out;
  // A top-level agent entry would bind a1 in every org: refused, with its line and the spelling to use.
  std::ofstream(dir.sub("bare.yaml")) << "mode: ask\nagents:\n  a1:\n    mode: restrict\n";
  EXPECT_EQ(RunTollgate("policy check " + dir.sub("bare.yaml"), &out), 1);
  EXPECT_NE(out.find("line 4: /agents/a1: an agent entry belongs to one org"), std::string::npos) << out;
  EXPECT_NE(out.find("orgs.<org>.agents.a1"), std::string::npos) << out;
}

TEST(PolicyCli, ExplainShowsTheDecisionAndThePathThroughTheChecks) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(RunTollgate("policy explain --data " + dir.sub("none") +
                            " --agent a1 --tool write_file --args '{\"path\":\"x\"}'",
                        &out),
            0)
      << out;
  Json d = LastLineJson(out);
  ASSERT_TRUE(d.is_object()) << out;
  EXPECT_EQ(d["verdict"], "ask");
  EXPECT_EQ(d["invocation"], "builtin:write_file");
  EXPECT_NE(out.find("checks:"), std::string::npos);
  EXPECT_NE(out.find("registry: pass"), std::string::npos) << out;
}

TEST(PolicyCli, ExplainReadsBudgetsFromTheLogUnderData) {
  TempDir dir;
  const std::string policy = dir.sub("p.yaml");
  std::ofstream(policy)
      << "allow: [\"*:*\"]\nbudgets:\n  - {name: cap, scope: agent, window: day, max_usd: 5}\n";
  {
    std::unique_ptr<EventLog> log;
    std::filesystem::create_directories(dir.sub("data"));
    Status s = EventLog::Open(dir.sub("data/log"), LogOptions{}, &log);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Event e = testing::MakeEvent("decision.made", "spent-1", "s1", "a1", "default", "echo", NowMicros());
    e.data = {{"verdict", "allow"},
              {"reason", "r"},
              {"rule", "x"},
              {"danger_level", "SAFE"},
              {"policy_version", "v"},
              {"reservation", {{"usd", 4.5}, {"received_at", FormatTime(NowMicros() - 1000)}}}};
    ASSERT_TRUE(log->Append(e).status.ok());
  }
  std::string out;
  ASSERT_EQ(RunTollgate("policy explain --policy " + policy + " --data " + dir.sub("data") +
                            " --agent a1 --tool echo --cost 1",
                        &out),
            0)
      << out;
  Json d = LastLineJson(out);
  EXPECT_EQ(d["verdict"], "deny") << out;
  EXPECT_EQ(d["error_code"], "E_BUDGET_EXCEEDED");
  EXPECT_NE(d["reason"].get<std::string>().find("spent $4.50 of $5.00"), std::string::npos) << d["reason"];
  // Another agent has its own budget.
  ASSERT_EQ(RunTollgate("policy explain --policy " + policy + " --data " + dir.sub("data") +
                            " --agent a2 --tool echo --cost 1",
                        &out),
            0);
  EXPECT_EQ(LastLineJson(out)["verdict"], "allow") << out;
}

}  // namespace
}  // namespace tollgate
