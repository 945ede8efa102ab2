// background_process across kill -9 (docs/tools.md, "background_process"):
// a pipeline spawns `sleep 600.N` and is killed; nothing of that sandbox
// is left (the parent-death signal of the table's thread, bwrap's
// --die-with-parent), and after a restart `list` reports the process lost
// without starting it again.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/test_util.h"

extern char** environ;

namespace tollgate {
namespace {

pid_t Start(const std::vector<std::string>& args, const std::string& out) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (out + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(BackgroundCrash, AKilledTollgateLeavesNoProcessAndTheRestartReportsItLost) {
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const std::string data = dir.sub("data"), tools = dir.sub("tools");
  std::filesystem::create_directories(tools);
  std::random_device rd;
  const std::string tag = "600." + std::to_string(rd() % 900000 + 100000);  // sleep's argument, unique
  pid_t pid = Start({CRASH_CHILD, "start", data, tools, "sleep " + tag}, dir.sub("start.out"));
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        return Slurp(dir.sub("start.out")).find('\n') != std::string::npos ||
               waitpid(pid, &status, WNOHANG) == pid;
      },
      std::chrono::seconds(60)));
  ASSERT_NE(Slurp(dir.sub("start.out")), "") << Slurp(dir.sub("start.out.err"));
  const Json spawned = Json::parse(Slurp(dir.sub("start.out")));
  ASSERT_EQ(spawned["result"]["success"], true) << spawned.dump();
  const std::string id = spawned["result"]["data"]["process_id"];
  ASSERT_TRUE(WaitFor([&] { return testing::Survivors(tag) > 0; }, std::chrono::seconds(10))) << "it runs";

  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(WaitFor([&] { return testing::Survivors(tag) == 0; }, std::chrono::seconds(10)))
      << "the background process outlived the killed tollgate";

  pid = Start({CRASH_CHILD, "list", data, tools}, dir.sub("list.out"));
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(dir.sub("list.out.err"));
  const Json listed = Json::parse(Slurp(dir.sub("list.out")));
  ASSERT_EQ(listed["result"]["success"], true) << listed.dump();
  const Json& procs = listed["result"]["data"]["processes"];
  ASSERT_EQ(procs.size(), 1u) << listed.dump();
  EXPECT_EQ(procs[0]["process_id"], id);
  EXPECT_EQ(procs[0]["status"], "lost");
  EXPECT_EQ(procs[0]["command"], "sleep " + tag);
  EXPECT_EQ(testing::Survivors(tag), 0) << "never started again";
}

}  // namespace
}  // namespace tollgate
