// Nothing that was running when the process died runs again, across
// kill -9: a process running the pipeline is killed while two calls of a
// CLI tool run (each has appended a line to a marker file in its workspace
// and is sleeping), one that decide called mutating and one it called
// read-only. The kill leaves no tool process behind (the sandbox dies with
// tollgate: docs/sandbox.md). After a restart, the reconciler re-drives the
// requests; execute finds execution.started without execution.completed
// and ends them without running the tool again: the mutating one with
// E_OUTCOME_UNKNOWN, the read-only one with E_EXECUTION_INTERRUPTED (it may
// be the call that took the process down; run at every start, it would
// take every start down).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "audit/audit_query.h"
#include "audit/event_log.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

extern char** environ;

namespace tollgate {
namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::string& out) {
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

int Lines(const std::string& path) {
  int n = 0;
  for (char c : Slurp(path)) n += c == '\n';
  return n;
}

// Processes running the tool's `sleep 59.713`.
int Sleepers() { return testing::Survivors("59.713"); }

TEST(ExecuteCrash, AKillDuringToolsEndsThemWithoutASecondRunMutatingOutcomeUnknownReadOnlyInterrupted) {
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const std::string data = dir.sub("data"), tools = dir.sub("tools");
  std::filesystem::create_directories(tools + "/slow_append");
  // The sandbox lets the tool write only in its workspace (the default root).
  const std::string marker = data + "/workspaces/o1/a1/runs";
  std::ofstream(tools + "/slow_append/run") << "#!/bin/sh\necho ran >> runs\nsleep 59.713\necho '{}'\n";
  std::filesystem::permissions(tools + "/slow_append/run", std::filesystem::perms(0755));
  std::ofstream(tools + "/slow_append/README.md") << "Appends a line, then sleeps.";

  pid_t pid = Spawn({CRASH_CHILD, "start", data, tools}, dir.sub("start.out"));
  ASSERT_GT(pid, 0);
  testing::WaitUntil([&] { return Lines(marker) >= 2; }, std::chrono::seconds(60));
  ASSERT_EQ(Lines(marker), 2) << "the tools never ran; child stderr: " << Slurp(dir.sub("start.out.err"));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  // The sandbox's processes die with tollgate, asynchronously: wait for it.
  testing::WaitUntil([&] { return Sleepers() == 0; }, std::chrono::seconds(10));
  ASSERT_EQ(Sleepers(), 0) << "the tool's `sleep` outlived the killed tollgate";
  // The pipeline made its data directory and log tollgate's alone.
  for (const std::string& d : {data, data + "/log"}) {
    struct stat st {};
    ASSERT_EQ(stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }

  pid = Spawn({CRASH_CHILD, "resume", data, tools}, dir.sub("resume.out"));
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(dir.sub("resume.out.err"));
  std::istringstream lines(Slurp(dir.sub("resume.out")));
  std::map<std::string, Json> results;
  for (std::string line; std::getline(lines, line);) {
    Json r = Json::parse(line);
    results[r["request_id"]] = r;
  }
  ASSERT_EQ(results.size(), 2u);
  const Json& mutating = results["crash-1"]["result"];
  const Json& read_only = results["crash-2"]["result"];
  EXPECT_EQ(results["crash-1"]["status"], "failed");
  EXPECT_EQ(mutating["error"]["code"], "E_OUTCOME_UNKNOWN") << mutating.dump();
  EXPECT_EQ(mutating["error"]["recoverable"], false);
  EXPECT_EQ(results["crash-2"]["status"], "failed");
  EXPECT_EQ(read_only["error"]["code"], "E_EXECUTION_INTERRUPTED") << read_only.dump();
  EXPECT_EQ(read_only["error"]["recoverable"], true) << "the agent may send it again as a new request";
  EXPECT_EQ(Lines(marker), 2) << "a tool ran a second time";
  EXPECT_EQ(Sleepers(), 0) << "the restart started nothing that still runs";

  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(EventLog::Open(data + "/log", LogOptions{}, &log).ok());
  for (const std::string rid : {"crash-1", "crash-2"}) {
    AuditQuery q;
    q.request_id = rid;
    AuditPage page;
    ASSERT_TRUE(GetAuditLog(log->store(), QueryScope::Operator(), q, &page).ok());
    std::vector<std::string> types;
    for (const auto& e : page.events) types.push_back(e.type);
    EXPECT_EQ(types, (std::vector<std::string>{"request.received", "decision.made", "execution.started",
                                               "execution.completed"}))
        << rid << ": one start, one end";
  }
}

}  // namespace
}  // namespace tollgate
