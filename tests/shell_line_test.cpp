// Command lines (core/shell_line.h, docs/policy.md "Command lines"): a line
// is read as sh reads it into its simple commands; decide holds the policy
// for every one of them (a line it cannot analyse is never allowed); execute
// checks every one again and runs exactly those argvs in the sandbox.
#include "core/shell_line.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "decide/glob.h"
#include "decide/policy_engine.h"
#include "tests/execute_test_util.h"

namespace tollgate {
namespace {

using Argvs = std::vector<std::vector<std::string>>;

Argvs ArgvsOf(const ShellLine& line) {
  Argvs out;
  for (const auto& c : line.commands) out.push_back(c.argv);
  return out;
}

constexpr int64_t kT0 = 1'795'000'000'000'000;

PolicyPtr MustLoad(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

Json CommandRequest(Json args) {
  return {{"request_id", "r1"},        {"org_id", "o1"},         {"agent_id", "a"}, {"session_id", "s1"},
          {"tool", "execute_command"}, {"args", std::move(args)}};
}

// The decision on `args` under `yaml` (and agent-local rules `local`).
Json DecideCommand(const std::string& yaml, Json args, PolicyInForce* local = nullptr) {
  PolicyInForce own;
  PolicyInForce& pif = local ? *local : own;
  pif.SetFile(MustLoad(yaml));
  BudgetLedger ledger;
  Json req = CommandRequest(std::move(args));
  return Decide(pif, ledger, DecideInput{&req, kT0});
}

// The policy: git allowed (curl denied outright, to show a deny
// holding for one command of a line).
constexpr const char* kGitPolicy = "mode: ask\nallow: [\"bash:git *\"]\ndeny: [\"bash:curl *\"]\n";

TEST(CommandLine, EachLineIsReadIntoItsSimpleCommandsAndDecidedForEveryOne) {
  struct Case {
    std::string line;
    Argvs commands;  // found (before the construct, for an unanalysable line)
    ShellLine::Kind kind;
    const char* verdict;
    const char* rule;  // prefix of decision.rule
  };
  using K = ShellLine::Kind;
  const std::vector<Case> cases = {
      {"git status && git diff",
       {{"git", "status"}, {"git", "diff"}},
       K::kOk,
       "allow",
       "org.allow:bash:git *"},
      {"git status; curl x", {{"git", "status"}, {"curl", "x"}}, K::kOk, "deny", "org.deny:bash:curl *"},
      {"git status || curl x", {{"git", "status"}, {"curl", "x"}}, K::kOk, "deny", "org.deny:bash:curl *"},
      {"git status | curl -d @- x",
       {{"git", "status"}, {"curl", "-d", "@-", "x"}},
       K::kOk,
       "deny",
       "org.deny"},
      {"git $(echo status)", {{"git"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git status > /etc/x", {{"git", "status"}}, K::kOk, "deny", "command:redirect"},
      {"git status > ../x", {{"git", "status"}}, K::kOk, "deny", "command:redirect"},
      {"eval git status", {}, K::kUnanalysable, "ask", "command:unanalysable"},
      // head only reshapes git's output: a pipe filter, covered by git's allow.
      {"git log | head -5", {{"git", "log"}, {"head", "-5"}}, K::kOk, "allow", "org.allow:bash:git *"},
      {"git log | head -5 /etc/passwd",
       {{"git", "log"}, {"head", "-5", "/etc/passwd"}},
       K::kOk,
       "ask",
       "approval_threshold"},
      {"git commit -m 'a; b'", {{"git", "commit", "-m", "a; b"}}, K::kOk, "allow", "org.allow:bash:git *"},
      {"git commit -m \"a && curl x\"",
       {{"git", "commit", "-m", "a && curl x"}},
       K::kOk,
       "allow",
       "org.allow"},
      {"\"git\" st\\atus", {{"git", "status"}}, K::kOk, "allow", "org.allow"},
      {"git status # ; curl x", {{"git", "status"}}, K::kOk, "allow", "org.allow"},
      {"git status\ngit diff", {{"git", "status"}, {"git", "diff"}}, K::kOk, "allow", "org.allow"},
      {"git status 2>/dev/null && git log > log.txt 2>&1",
       {{"git", "status"}, {"git", "log"}},
       K::kOk,
       "allow",
       "org.allow"},
      {"git log `whoami`", {{"git", "log"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git log \"`whoami`\"", {{"git", "log"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git log ${X}", {{"git", "log"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git log \"$HOME\"", {{"git", "log"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git log $((1+1))", {{"git", "log"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git diff <(ls)", {{"git", "diff"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git apply <<EOF\nx\nEOF", {{"git", "apply"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git apply <<< x", {{"git", "apply"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"X=1 git status", {}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"bash -c 'git status'", {}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git status; sh", {{"git", "status"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"git -C ~ status", {{"git", "-C"}}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"(git status)", {}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"{ git status; }", {}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"if git status; then git diff; fi", {}, K::kUnanalysable, "ask", "command:unanalysable"},
      {"gi? status", {}, K::kUnanalysable, "ask", "command:unanalysable"},
      // A deny on a command found before the construct still denies.
      {"curl x; git $(id)", {{"curl", "x"}, {"git"}}, K::kUnanalysable, "deny", "org.deny:bash:curl *"},
      {"git status &&", {{"git", "status"}}, K::kInvalid, "deny", "command:invalid"},
      {"git commit -m 'unterminated", {}, K::kInvalid, "deny", "command:invalid"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    const ShellLine line = ParseShellLine(c.line);
    EXPECT_EQ(line.kind, c.kind) << line.reason;
    EXPECT_EQ(ArgvsOf(line), c.commands);
    const Json d = DecideCommand(kGitPolicy, {{"command", c.line}});
    EXPECT_EQ(d["verdict"], c.verdict) << d.dump();
    EXPECT_EQ(d["rule"].get<std::string>().rfind(c.rule, 0), 0u) << d["rule"];
    EXPECT_EQ(d["invocation"], "bash:" + c.line);
  }
}

TEST(CommandLine, TheDecisionRecordsTheSimpleCommandsAndNamesTheConstruct) {
  Json d = DecideCommand(kGitPolicy, {{"command", "git status && git diff"}});
  bool found = false;
  for (const auto& c : d["checks"]) {
    if (c["check"] == "command") {
      EXPECT_EQ(c["result"], "pass");
      EXPECT_EQ(c["detail"], "2 simple commands: [git status] [git diff]");
      found = true;
    }
  }
  EXPECT_TRUE(found) << d.dump();
  d = DecideCommand(kGitPolicy, {{"command", "git $(echo status)"}});
  EXPECT_NE(d["reason"].get<std::string>().find("command substitution $(...)"), std::string::npos)
      << d["reason"];
  d = DecideCommand(kGitPolicy, {{"command", "git status\ncurl x"}});
  EXPECT_NE(d["reason"].get<std::string>().find("simple command 2 of the line, 'bash:curl x'"),
            std::string::npos)
      << d["reason"];
}

TEST(CommandLine, AnArgvIsOneCommandWhateverItsBytes) {
  // args given: no shell reads anything, so `;` is an argument of git.
  Json d = DecideCommand(kGitPolicy, {{"command", "git"}, {"args", {"status", ";", "curl", "x"}}});
  EXPECT_EQ(d["verdict"], "allow") << d.dump();
  EXPECT_EQ(d["invocation"], "bash:git status ; curl x");
  for (const auto& c : d["checks"]) EXPECT_NE(c["check"], "command") << "an argv has no line to read";
}

TEST(CommandLine, ALineThatCannotBeAnalysedIsNeverAllowedInAnyMode) {
  const Json args = {{"command", "git status $(curl x)"}};
  EXPECT_EQ(DecideCommand("mode: bypass\n", args)["verdict"], "ask");
  EXPECT_EQ(DecideCommand("mode: dangerous\nallow: [\"bash:*\"]\n", args)["verdict"], "ask");
  EXPECT_EQ(DecideCommand("mode: restrict\nallow: [\"bash:*\"]\n", args)["verdict"], "deny");
  // An allow rule on the tool does not allow it either; a deny still denies.
  EXPECT_EQ(DecideCommand("rules: [{name: r, tool: [execute_command], verdict: allow}]\n", args)["verdict"],
            "ask");
  EXPECT_EQ(DecideCommand("deny: [\"bash:*\"]\n", args)["verdict"], "deny");
  // Analysable lines keep bypass's meaning.
  EXPECT_EQ(DecideCommand("mode: bypass\n", {{"command", "git status; curl x"}})["verdict"], "allow");
}

TEST(CommandLine, CommandRulesHoldForEverySimpleCommand) {
  const std::string rules =
      "rules:\n"
      "  - {name: no-curl, tool: [execute_command], when: {command: [curl]}, verdict: deny}\n"
      "  - {name: git-ok, tool: [execute_command], when: {command: [git]}, verdict: allow}\n";
  Json d = DecideCommand(rules, {{"command", "git status; curl x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"], "org.rule:no-curl");
  d = DecideCommand(rules, {{"command", "git status | head -5"}});
  EXPECT_EQ(d["verdict"], "ask") << "head is not git: the allow rule does not hold for every command";
  d = DecideCommand(rules, {{"command", "git status && /usr/bin/git diff"}});
  EXPECT_EQ(d["verdict"], "allow");
  EXPECT_EQ(d["rule"], "org.rule:git-ok");
}

TEST(CommandLine, AnAllowAlwaysOfTheExactLineAllowsThatLineOnly) {
  PolicyInForce local;
  const std::string line = "git status; ls -la";
  ASSERT_TRUE(local.AddAgentLocal("o1", "a", {EscapeGlob("bash:" + line)}, std::string(64, 'a')).ok());
  EXPECT_EQ(DecideCommand("mode: ask\n", {{"command", line}}, &local)["verdict"], "allow");
  PolicyInForce local2;
  ASSERT_TRUE(local2.AddAgentLocal("o1", "a", {EscapeGlob("bash:" + line)}, std::string(64, 'a')).ok());
  EXPECT_EQ(DecideCommand("mode: ask\n", {{"command", line + "; curl x"}}, &local2)["verdict"], "ask");
}

TEST(CommandLine, EveryCommandNeedsAnAllowPatternOfSomeTier) {
  const std::string yaml = "allow: [\"bash:git *\", \"bash:wc -l\"]\n";
  EXPECT_EQ(DecideCommand(yaml, {{"command", "git log | wc -l"}})["verdict"], "allow");
  // wc after ';' reads no pipe: not a filter of git's output.
  Json d = DecideCommand(yaml, {{"command", "git log; wc -c"}});
  EXPECT_EQ(d["verdict"], "ask");
  bool named = false;
  for (const auto& c : d["checks"])
    named = named || (c["check"] == "allow" && c["detail"] == "'bash:wc -c' matches no allow pattern");
  EXPECT_TRUE(named) << d.dump();
}

TEST(ShellLineParser, RedirectionsKeepTheirFdOpAndTarget) {
  const ShellLine l = ParseShellLine("cmd <in 2>>err.log >|out 3>&1 &>both 1<&- >>app");
  ASSERT_TRUE(l.ok()) << l.reason;
  ASSERT_EQ(l.commands.size(), 1u);
  std::vector<std::string> got;
  for (const auto& r : l.commands[0].redirections) got.push_back(std::to_string(r.fd) + r.op + r.target);
  EXPECT_EQ(got,
            (std::vector<std::string>{"0<in", "2>>err.log", "1>|out", "3>&1", "1&>both", "1<&-", "1>>app"}));
  EXPECT_EQ(RenderShellLine(l), "'cmd' 0<'in' 2>>'err.log' 1>|'out' 3>&1 >'both' 2>&1 1<&- 1>>'app'");
  // A quoted or glued digit is a word, not an fd.
  EXPECT_EQ(ArgvsOf(ParseShellLine("echo '2'>x a2>y")), (Argvs{{"echo", "2", "a2"}}));
}

TEST(ShellLineParser, RefusesLimitsAndNul) {
  EXPECT_EQ(ParseShellLine(std::string(kMaxShellLineBytes + 1, 'a')).kind, ShellLine::Kind::kInvalid);
  EXPECT_EQ(ParseShellLine(std::string("ls\0x", 4)).kind, ShellLine::Kind::kInvalid);
  std::string many;
  for (size_t i = 0; i <= kMaxSimpleCommands; ++i) many += "ls;";
  EXPECT_EQ(ParseShellLine(many).kind, ShellLine::Kind::kInvalid);
  EXPECT_EQ(ParseShellLine("   # only a comment").kind, ShellLine::Kind::kInvalid);
  EXPECT_EQ(ParseShellLine("ls ;; ls").kind, ShellLine::Kind::kUnanalysable);
  EXPECT_EQ(ParseShellLine("; ls").kind, ShellLine::Kind::kInvalid);
  EXPECT_EQ(ParseShellLine("> f").kind, ShellLine::Kind::kUnanalysable);
  EXPECT_EQ(ParseShellLine("ls 10>x").kind, ShellLine::Kind::kUnanalysable);
  EXPECT_EQ(ParseShellLine("ls >&file").kind, ShellLine::Kind::kUnanalysable);
  // A lone $ before a blank or the end is literal; anything after it is an expansion.
  EXPECT_EQ(ArgvsOf(ParseShellLine("echo $ \"a $\"")), (Argvs{{"echo", "$", "a $"}}));
  EXPECT_EQ(ParseShellLine("echo $'x'").kind, ShellLine::Kind::kUnanalysable);
  EXPECT_EQ(ParseShellLine("echo $1").kind, ShellLine::Kind::kUnanalysable);
  // Single quotes keep everything.
  EXPECT_EQ(ArgvsOf(ParseShellLine("echo '$(id) `id` ~ *'")), (Argvs{{"echo", "$(id) `id` ~ *"}}));
}

TEST(ShellLineParser, RedirectTargetsStayInTheWorkspace) {
  for (const char* ok : {"out.txt", "a/b", "./x", "/dev/null", "a..b"})
    EXPECT_TRUE(IsWorkspaceRedirectTarget(ok)) << ok;
  for (const char* bad : {"/etc/x", "../x", "a/../../x", "..", "", "/dev/tcp/1.2.3.4/80", "/dev/stdout"}) {
    EXPECT_FALSE(IsWorkspaceRedirectTarget(bad)) << bad;
  }
}

// ---------------------------------------------------------------------------
// Execute: the line runs in the sandbox as parsed.
class LineTest : public ::testing::Test, public testing::ToolFixture {
 protected:
  void SetUp() override {
    policy().limits.timeout_ms = 10000;
    policy().limits.processes = 32;
  }
  Json Line(const std::string& line, Json extra = Json::object()) {
    extra["command"] = line;
    return Call("execute_command", extra);
  }
};

TEST_F(LineTest, TheSeedsCommandStringRunsInTheSandboxWithTheSeedsFields) {
  Write(workspace() + "/notes.txt", "hi");
  Json r = Line("ls -la", {{"timeout", 60}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_NE(r["data"]["stdout"].get<std::string>().find("notes.txt"), std::string::npos);
  EXPECT_EQ(r["data"]["returncode"], 0);
  EXPECT_EQ(r["data"]["exit_code"], 0);
  EXPECT_EQ(r["data"]["stderr"], "");
  EXPECT_EQ(r["meta"]["command"], "ls -la");
  EXPECT_EQ(r["meta"]["sandbox"], true);

  r = Line("echo a && echo b");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["stdout"], "a\nb\n");
  EXPECT_EQ(r["meta"]["command"], "echo a && echo b");
  EXPECT_EQ(r["meta"]["sandbox"], true);
  // The argv form carries the same fields.
  r = Call("execute_command", {{"command", "echo"}, {"args", {"x y"}}});
  EXPECT_EQ(r["meta"]["command"], "echo x y");
  EXPECT_EQ(r["data"]["returncode"], 0);
}

TEST_F(LineTest, APipelineRedirectionsAndFailuresRunAsSh) {
  Json r = Line("echo hi | wc -c");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["stdout"], "3\n");
  r = Line("echo saved > out.txt && cat out.txt");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["stdout"], "saved\n");
  r = Line("ls missing-file &> both.txt; cat both.txt");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_NE(r["data"]["stdout"].get<std::string>().find("missing-file"), std::string::npos);
  r = Line("false || echo fallback");
  EXPECT_EQ(r["data"]["stdout"], "fallback\n");
  r = Line("echo x && false");
  EXPECT_EQ(Code(r), "E_TOOL_EXEC");
  EXPECT_EQ(r["data"]["returncode"], 1);
  EXPECT_EQ(r["data"]["stdout"], "x\n");
}

TEST_F(LineTest, EachArgvIsExactlyTheParsedOneAndEachProgramTheCheckedFile) {
  Write(workspace() + "/a.txt", "");
  // No glob, no builtin: /usr/bin/echo prints the backslash dash's echo would eat.
  Json r = Line("echo * 'a\\nb' | cat");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["stdout"], "* a\\nb\n");
}

TEST_F(LineTest, EveryCommandOfTheLineIsCheckedBeforeAnythingRuns) {
  for (const char* line :
       {"echo a; curl x", "echo a | sh", "echo a && find . -exec id ;", "echo a; rm -rf /"}) {
    Json r = Line(line);
    EXPECT_EQ(Code(r), "E_CMD_NOT_ALLOWED") << line << r.dump();
    EXPECT_EQ(r["meta"]["sandbox"], false) << line;
  }
  Json r = Line("echo $(id)");
  EXPECT_EQ(Code(r), "E_CMD_NOT_ALLOWED");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("command substitution"), std::string::npos);
  EXPECT_EQ(Code(Line("echo x > /tmp/escape")), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Line("cat < ../other")), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Line("echo 'open")), "E_INVALID_ARGS");
  EXPECT_FALSE(std::filesystem::exists("/tmp/escape"));
}

TEST_F(LineTest, ALineThatCannotBeAnalysedRunsOnlyAsAnApproverGrantedIt) {
  const Json args = {{"command", "echo $((1+2)) | cat"}};
  EXPECT_EQ(Code(Call("execute_command", args)), "E_CMD_NOT_ALLOWED") << "under an allow decision";
  // decide's ask for it, granted: the line runs as written.
  ToolContext c = Ctx();
  c.decision = DecideCommand("mode: ask\n", args);
  ASSERT_EQ(c.decision["rule"], "command:unanalysable") << c.decision.dump();
  Json r = registry_.Find("execute_command")->Run(args, c);
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["stdout"], "3\n");
  EXPECT_EQ(r["meta"]["sandbox"], true);
  // The commands the parser saw before the construct are still checked.
  const Json curl = {{"command", "curl x; echo $((1))"}};
  c.decision = DecideCommand("mode: ask\n", curl);
  EXPECT_EQ(Code(registry_.Find("execute_command")->Run(curl, c)), "E_CMD_NOT_ALLOWED");
}

TEST_F(LineTest, TimeoutInSecondsKillsTheLine) {
  const auto t0 = std::chrono::steady_clock::now();
  Json r = Line("sleep 5 && echo late", {{"timeout", 1}});
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(Code(r), "E_TIMEOUT") << r.dump();
  EXPECT_LT(took, std::chrono::seconds(4));
  EXPECT_EQ(Code(Line("echo x", {{"timeout", 0}})), "E_INVALID_ARGS");
  EXPECT_EQ(Code(Line("echo x", {{"timeout", "1"}})), "E_INVALID_ARGS");
}

TEST_F(LineTest, RolesNarrowOrWidenOnlyAsThePolicySays) {
  EXPECT_TRUE(Line("echo hi | wc -c", {{"role", "viewer"}})["success"]);
  EXPECT_EQ(Code(Line("sleep 0", {{"role", "viewer"}})), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Line("echo hi > f.txt", {{"role", "viewer"}})), "E_CMD_NOT_ALLOWED");
  EXPECT_TRUE(Line("echo hi > /dev/null", {{"role", "viewer"}})["success"]);
  EXPECT_TRUE(Line("sleep 0", {{"role", "operator"}})["success"]);
  EXPECT_EQ(Code(Line("echo x", {{"role", "root"}})), "E_INVALID_ARGS");
  // admin: never on the agent's word.
  Json r = Line("nproc", {{"role", "admin"}});
  EXPECT_EQ(Code(r), "E_CMD_NOT_ALLOWED");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("admin_agents"), std::string::npos);
  policy().admin_agents = {"o1/a1"};
  policy().admin_allowlist = {"nproc"};
  EXPECT_EQ(Code(Line("nproc")), "E_CMD_NOT_ALLOWED") << "operator: not on the allowlist";
  r = Line("nproc", {{"role", "admin"}});
  EXPECT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(Code(Call("execute_command", {{"command", "nproc"}, {"role", "admin"}}, "o1", "a2")),
            "E_CMD_NOT_ALLOWED")
      << "another agent";
}

}  // namespace
}  // namespace tollgate
