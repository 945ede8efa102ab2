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
  EXPECT_NE(out.find(dir.sub("bad.yaml") + ":6:15: /orgs/o1/agents/a1/mode"), std::string::npos) << out;
  // A top-level agent entry would bind a1 in every org: refused, with its line and the spelling to use.
  std::ofstream(dir.sub("bare.yaml")) << "mode: ask\nagents:\n  a1:\n    mode: restrict\n";
  EXPECT_EQ(RunTollgate("policy check " + dir.sub("bare.yaml"), &out), 1);
  EXPECT_NE(out.find(dir.sub("bare.yaml") + ":4:5: /agents/a1: an agent entry belongs to one org"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("orgs.<org>.agents.a1"), std::string::npos) << out;
}

// Every problem at once, each as FILE:LINE:COL (issue 31): schema
// violations (an unknown top-level key at its key), bad globs beside them,
// an unreachable quorum, and an org section's errors.
TEST(PolicyCli, CheckReportsEveryProblemWithItsFileLineAndColumn) {
  TempDir dir;
  const std::string file = dir.sub("many.yaml");
  std::ofstream(file) << "mode: sideways\n"                                      // 1
                         "bogus_key: 1\n"                                        // 2
                         "deny:\n"                                               // 3
                         "  - \"cli:ok\"\n"                                      // 4
                         "  - 3\n"                                               // 5
                         "  - \"cli:[bad\"\n"                                    // 6
                         "rules:\n"                                              // 7
                         "  - {name: r, verdict: maybe}\n"                       // 8
                         "approvals:\n"                                          // 9
                         "  groups: {ops: [alice]}\n"                            // 10
                         "  default: {quorum: 2, approvers: [\"group:ops\"]}\n"  // 11
                         "orgs:\n"                                               // 12
                         "  acme:\n"                                             // 13
                         "    modes: ask\n"                                      // 14
                         "  globex:\n"                                           // 15
                         "    deny: [\"cli:[also-bad\"]\n";                      // 16
  std::string out;
  EXPECT_EQ(RunTollgate("policy check " + file, &out), 1) << out;
  for (const std::string& want : {
           file + ":1:7: /mode: must be one of",
           file + ":2:1: unknown field 'bogus_key'",
           file + ":5:5: /deny/1: expected string, got integer",
           file + ":6:5: ",
           file + ":8:",
           file + ":11:12: quorum 2 needs at least that many approvers; 1 listed",
           file + ":14:5: /orgs/acme: unknown field 'modes'",
           file + ":16:",
       }) {
    EXPECT_NE(out.find(want), std::string::npos) << "missing: " << want << "\n" << out;
  }
  EXPECT_NE(out.find("(in org 'globex')"), std::string::npos) << out;
  EXPECT_NE(out.find(file + ": 8 problems; not loaded"), std::string::npos) << out;
  // In file order.
  EXPECT_LT(out.find(file + ":1:"), out.find(file + ":2:"));
  EXPECT_LT(out.find(file + ":11:"), out.find(file + ":16:"));
}

// History rules (docs/policy.md, "History"): a window that is missing or
// out of bounds, an unknown label and an unknown tool, each at its line.
TEST(PolicyCli, CheckRefusesUnboundedHistoryWindowsUnknownLabelsAndUnknownTools) {
  TempDir dir;
  const std::string file = dir.sub("history.yaml");
  std::ofstream(file)
      << "mode: ask\n"                                                                      // 1
         "rules:\n"                                                                         // 2
         "  - {name: a, after: {tool: echo}, then: {tool: echo}, verdict: ask}\n"           // 3
         "  - {name: b, after: {tool: echo}, within: {minutes: 99999}, verdict: ask}\n"     // 4
         "  - {name: c, tool: echo, when: {session: {integrity: shady}}, verdict: deny}\n"  // 5
         "  - {name: d, after: {tool: reed_file}, within: {calls: 5}, verdict: deny}\n";    // 6
  std::string out;
  EXPECT_EQ(RunTollgate("policy check " + file, &out), 1) << out;
  for (const std::string& want : {file + ":4:", file + ":5:"}) {
    EXPECT_NE(out.find(want), std::string::npos) << "missing: " << want << "\n" << out;
  }
  // The compiler's refusals come once the schema's are mended.
  std::ofstream(file) << "mode: ask\n"
                         "rules:\n"
                         "  - {name: a, after: {tool: echo}, then: {tool: echo}, verdict: ask}\n";
  EXPECT_EQ(RunTollgate("policy check " + file, &out), 1) << out;
  EXPECT_NE(out.find("bounded within:"), std::string::npos) << out;
  std::ofstream(file) << "mode: ask\n"
                         "rules:\n"
                         "  - {name: d, after: {tool: reed_file}, within: {calls: 5}, verdict: deny}\n";
  EXPECT_EQ(RunTollgate("policy check " + file, &out), 1) << out;
  EXPECT_NE(out.find(file + ":3:"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown tool 'reed_file'"), std::string::npos) << out;
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

// The session's history from the log (docs/policy.md, "History"): an
// untrusted fetch completed in s1, so a POST there is denied, and the
// explanation names the rule and the fetch's seq; s2 has no history.
TEST(PolicyCli, ExplainReadsTheSessionsHistoryFromTheLogUnderData) {
  TempDir dir;
  const std::string policy = dir.sub("p.yaml");
  std::ofstream(policy) << "mode: dangerous\n"
                           "http_request: {allowed_methods: [GET, POST]}\n"
                           "labels: {trusted_hosts: [localhost]}\n"
                           "rules:\n"
                           "  - {name: no-post-after-untrusted, tool: http_request,\n"
                           "     when: {method: POST, session: {integrity: untrusted}}, verdict: deny}\n";
  uint64_t fetched = 0;
  {
    std::unique_ptr<EventLog> log;
    std::filesystem::create_directories(dir.sub("data"));
    Status s = EventLog::Open(dir.sub("data/log"), LogOptions{}, &log);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Event e =
        testing::MakeEvent("decision.made", "get-1", "s1", "a1", "default", "http_request", NowMicros());
    e.data = {{"verdict", "allow"},
              {"reason", "r"},
              {"rule", "x"},
              {"danger_level", "MEDIUM"},
              {"policy_version", "v"},
              {"read_only", true},
              {"invocation", "http_request:GET http://127.0.0.1:9/page"}};
    ASSERT_TRUE(log->Append(e).status.ok());
    e = testing::MakeEvent("execution.completed", "get-1", "s1", "a1", "default", "http_request",
                           NowMicros());
    e.data = {{"result", {{"success", true}}}, {"duration_ms", 1}};
    AppendResult r = log->Append(e);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    fetched = r.seq;
  }
  const std::string post =
      " --agent a1 --tool http_request --args '{\"method\":\"POST\",\"url\":\"http://localhost:9/up\"}'";
  std::string out;
  ASSERT_EQ(
      RunTollgate("policy explain --policy " + policy + " --data " + dir.sub("data") + " --session s1" + post,
                  &out),
      0)
      << out;
  EXPECT_EQ(LastLineJson(out)["verdict"], "deny") << out;
  EXPECT_NE(out.find("history   session s1: 1 completed calls, untrusted, public; untrusted since seq " +
                     std::to_string(fetched)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("decided by history rule 'no-post-after-untrusted' on seq " + std::to_string(fetched)),
            std::string::npos)
      << out;
  ASSERT_EQ(
      RunTollgate("policy explain --policy " + policy + " --data " + dir.sub("data") + " --session s2" + post,
                  &out),
      0);
  EXPECT_EQ(LastLineJson(out)["verdict"], "allow") << out;
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
