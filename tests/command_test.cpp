// The command suite: execute_command runs allowlisted programs with an argv,
// never a shell, and contains whatever they do — a fork bomb, an infinite
// loop, a huge allocation, an output flood, a child left behind — with no
// process surviving the call (checked in /proc by a unique tag). What the
// sandbox hides and forbids is sandbox_test's.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "execute/sandbox.h"
#include "tests/execute_test_util.h"

namespace tollgate {

std::string DestructiveReason(const std::vector<std::string>& argv);

namespace {

using testing::SurvivorsAfterTeardown;
using testing::ToolFixture;

class CommandTest : public ::testing::Test, public ToolFixture {
 protected:
  void SetUp() override {
    helper_ = AllowExecHelper(EXEC_HELPER);
    policy().limits.timeout_ms = 3000;
    policy().limits.cpu_seconds = 2;
    policy().limits.memory_mb = 256;
    policy().limits.processes = 20;
    policy().limits.max_output_bytes = 4096;
    tag_ = UniqueTag();
  }
  Json Cmd(const std::string& command, const Json& args) {
    return Call("execute_command", {{"command", command}, {"args", args}});
  }
  std::string helper_, tag_;
};

TEST_F(CommandTest, RunsAnAllowlistedProgramInTheWorkspace) {
  Write(workspace() + "/hello.txt", "hi");
  Json r = Cmd("ls", Json::array());
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["stdout"], "hello.txt\n");
  EXPECT_EQ(r["data"]["exit_code"], 0);
  r = Cmd("cat", {"hello.txt"});
  EXPECT_EQ(r["data"]["stdout"], "hi");
  r = Cmd("cat", {"missing"});
  EXPECT_EQ(Code(r), "E_TOOL_EXEC");
  EXPECT_EQ(r["data"]["exit_code"], 1);
  if (geteuid() == 0) {
    r = Cmd("id", {"-u"});
    EXPECT_NE(r["data"]["stdout"], "0\n") << "as root, children run as nobody";
  }
}

TEST_F(CommandTest, TheEnvironmentIsScrubbed) {
  setenv("TOLLGATE_SECRET_TEST", "leak", 1);
  policy().command_allowlist.push_back("env_probe");
  Json r = Cmd("cat", {"/proc/self/environ"});
  ASSERT_TRUE(r["success"]) << r.dump();
  const std::string env = r["data"]["stdout"];
  EXPECT_EQ(env.find("TOLLGATE_SECRET_TEST"), std::string::npos);
  EXPECT_NE(env.find("PATH=/usr/local/bin:/usr/bin:/bin"), std::string::npos);
}

TEST_F(CommandTest, RefusesWhatIsNotAllowed) {
  for (const char* c : {"bash", "sh", "python3", "perl", "node", "curl", "rm", "find", "env", "xargs"}) {
    EXPECT_EQ(Code(Cmd(c, Json::array())), "E_CMD_NOT_ALLOWED") << c;
  }
  // Blocklisted even when the allowlist names it.
  policy().command_allowlist.push_back("bash");
  policy().command_allowlist.push_back("python3.11");
  EXPECT_EQ(Code(Cmd("bash", {"-c", "id"})), "E_CMD_NOT_ALLOWED");
  // A symlink named like an allowed tool but leading to an interpreter.
  std::filesystem::create_symlink("/bin/bash", dir().sub("ls"));
  policy().command_allowlist.push_back(dir().sub("ls"));
  EXPECT_EQ(Code(Cmd(dir().sub("ls"), Json::array())), "E_CMD_NOT_ALLOWED");
  // Shell lines in the command name.
  for (const char* c : {"ls; rm -rf /", "ls | sh", "$(id)", "`id`", "ls && id", "ls > x", "ls -la"}) {
    EXPECT_EQ(Code(Cmd(c, Json::array())), "E_CMD_NOT_ALLOWED") << c;
  }
  EXPECT_EQ(Code(Cmd("-ls", Json::array())), "E_INVALID_ARGS");
  EXPECT_EQ(Code(Call("execute_command", {{"command", "ls"}, {"args", "-la"}})), "E_INVALID_ARGS");
  EXPECT_EQ(Code(Call("execute_command", {{"command", "ls"}, {"args", {1}}})), "E_INVALID_ARGS");
  // Options that run another program.
  policy().command_allowlist.push_back("tar");
  policy().interpreter_blocklist.erase(
      std::remove(policy().interpreter_blocklist.begin(), policy().interpreter_blocklist.end(), "find"),
      policy().interpreter_blocklist.end());
  policy().command_allowlist.push_back("find");
  EXPECT_EQ(Code(Cmd("find", {".", "-exec", "id", ";"})), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Cmd("tar", {"cf", "x.tar", "--to-command=sh", "."})), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Cmd("tar", {"cf", "x.tar", "--checkpoint-action=exec=sh", "."})), "E_CMD_NOT_ALLOWED");
  // GNU abbreviations and option clusters name the same options.
  EXPECT_EQ(Code(Cmd("tar", {"cf", "x.tar", "--to-com=sh", "."})), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Cmd("tar", {"cf", "x.tar", "--checkpoint-a", "exec=sh", "."})), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Cmd("tar", {"cIf", "sh", "x.tar", "."})), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Cmd("find", {".", "-execdir", "id", ";"})), "E_CMD_NOT_ALLOWED");
}

TEST(Destructive, PatternsAreRecognised) {
  using V = std::vector<std::string>;
  EXPECT_NE(DestructiveReason(V{"rm", "-rf", "/"}), "");
  EXPECT_NE(DestructiveReason(V{"rm", "-r", "-f", "/*"}), "");
  EXPECT_NE(DestructiveReason(V{"rm", "--recursive", "~"}), "");
  EXPECT_NE(DestructiveReason(V{"/bin/rm", "-fr", "--no-preserve-root", "/"}), "");
  EXPECT_NE(DestructiveReason(V{"chmod", "-R", "777", "/"}), "");
  EXPECT_NE(DestructiveReason(V{"mkfs.ext4", "/dev/sda"}), "");
  EXPECT_NE(DestructiveReason(V{"dd", "if=/dev/zero", "of=/dev/sda"}), "");
  EXPECT_NE(DestructiveReason(V{"shutdown", "-h", "now"}), "");
  EXPECT_NE(DestructiveReason(V{"kill", "-9", "-1"}), "");
  EXPECT_EQ(DestructiveReason(V{"rm", "-f", "build/x.o"}), "");
  EXPECT_EQ(DestructiveReason(V{"ls", "-R", "/"}), "");
}

TEST_F(CommandTest, MetacharactersAndDashArgumentsArePlainBytes) {
  Json r = Cmd(helper_, {"args", "a; touch pwned", "$(touch pwned2)", "`id`", "| cat", "&& id", "-rf",
                         "--help", "-", "--", "*", "~", "x\ny"});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["stdout"],
            "a; touch pwned\n$(touch pwned2)\n`id`\n| cat\n&& id\n-rf\n--help\n-\n--\n*\n~\nx\ny\n");
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/pwned"));
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/pwned2"));
  r = Cmd("echo", {"-n", "$HOME"});
  EXPECT_EQ(r["data"]["stdout"], "$HOME") << "no expansion";
  r = Call("execute_command", {{"command", helper_}, {"args", {"stdin"}}, {"stdin", "in; rm -rf /"}});
  EXPECT_EQ(r["data"]["stdout"], "in; rm -rf /");
}

TEST_F(CommandTest, InfiniteLoopIsKilled) {
  auto t0 = std::chrono::steady_clock::now();
  Json r = Cmd(helper_, {"spin", tag_});
  EXPECT_FALSE(r["success"]);
  EXPECT_TRUE(Code(r) == "E_TIMEOUT" || Code(r) == "E_TOOL_EXEC") << r.dump();  // wall clock or RLIMIT_CPU
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(SurvivorsAfterTeardown(tag_), 0);
}

TEST_F(CommandTest, TimeoutKillsTheWholeGroup) {
  Json r = Call("execute_command", {{"command", "sleep"}, {"args", {"30"}}, {"timeout_ms", 300}});
  EXPECT_EQ(Code(r), "E_TIMEOUT") << r.dump();
  EXPECT_TRUE(r["error"]["recoverable"]);
  EXPECT_LT(r["data"]["duration_ms"].get<double>(), 2000);
}

TEST_F(CommandTest, ForkBombIsContained) {
  if (geteuid() == 0 && policy().run_as.empty()) GTEST_SKIP() << "root ignores RLIMIT_NPROC";
  policy().limits.timeout_ms = 1500;
  Json r = Cmd(helper_, {"forkbomb", tag_});
  EXPECT_FALSE(r["success"]);
  EXPECT_EQ(Code(r), "E_TIMEOUT") << r.dump();
  // Give the kernel a moment to tear the group down.
  EXPECT_EQ(SurvivorsAfterTeardown(tag_), 0) << "no orphan of the fork bomb survives";
}

TEST_F(CommandTest, HugeAllocationIsRefused) {
  Json r = Cmd(helper_, {"alloc", tag_});
  EXPECT_FALSE(r["success"]);
  EXPECT_EQ(Code(r), "E_TOOL_EXEC") << r.dump();
  EXPECT_EQ(r["data"]["exit_code"], 3) << "malloc failed under RLIMIT_AS";
  EXPECT_EQ(SurvivorsAfterTeardown(tag_), 0);
}

TEST_F(CommandTest, OutputFloodIsCappedAndKilled) {
  policy().limits.timeout_ms = 1000;
  Json r = Cmd(helper_, {"flood", tag_});
  EXPECT_EQ(Code(r), "E_TIMEOUT") << r.dump().substr(0, 300);
  EXPECT_EQ(r["data"]["stdout"].get<std::string>().size(), 4096u);
  EXPECT_TRUE(r["data"]["stdout_truncated"]);
  EXPECT_EQ(SurvivorsAfterTeardown(tag_), 0);
}

TEST_F(CommandTest, AChildLeftBehindIsKilled) {
  Json r = Cmd(helper_, {"orphan", tag_});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_LT(r["data"]["duration_ms"].get<double>(), 2500) << "does not wait for the sleeper's full hour";
  EXPECT_EQ(SurvivorsAfterTeardown(tag_), 0) << "the sleeping child was killed with its group";
}

}  // namespace
}  // namespace tollgate
