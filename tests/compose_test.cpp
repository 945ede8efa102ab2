// compose.yaml: no Docker engine runs here, so check what can be checked —
// the file parses, the services are wired, and the tollgate service's
// command is a valid `tollgate` invocation (run with --check).
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <fstream>

extern char** environ;

namespace {

int RunProcess(std::vector<std::string> args, std::string* out) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) return -1;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out->append(buf, n);
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Compose, ParsesAndRunsAValidTollgateCommand) {
  YAML::Node doc = YAML::LoadFile(TOLLGATE_SOURCE_DIR "/compose.yaml");
  ASSERT_TRUE(doc["services"]["kafka"]) << "a Kafka service";
  YAML::Node tollgate = doc["services"]["tollgate"];
  ASSERT_TRUE(tollgate);
  EXPECT_EQ(tollgate["depends_on"]["kafka"]["condition"].as<std::string>(), "service_healthy");
  auto command = tollgate["command"].as<std::vector<std::string>>();
  ASSERT_GE(command.size(), 2u);
  EXPECT_EQ(command[0], "tollgate");
  // The log lives on a volume.
  bool data_on_volume = false;
  for (size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == "--data") {
      for (const auto& v : tollgate["volumes"]) {
        data_on_volume |= v.as<std::string>().find(":" + command[i + 1]) != std::string::npos;
      }
    }
  }
  EXPECT_TRUE(data_on_volume);
  command[0] = TOLLGATE_BIN;
  command.push_back("--check");
  std::string out;
  ASSERT_EQ(RunProcess(command, &out), 0) << out;
  EXPECT_NE(out.find("\"brokers\":\"kafka:9092\""), std::string::npos) << out;

  // And --check does refuse a bad invocation, so the test can fail.
  std::string bad_out;
  EXPECT_NE(RunProcess({TOLLGATE_BIN, "up", "--durability", "sometimes", "--check"}, &bad_out), 0);
  EXPECT_NE(RunProcess({TOLLGATE_BIN, "up", "--no-such-flag", "--check"}, &bad_out), 0);
}

TEST(Compose, DockerfileBuildsWithTheSetupScript) {
  std::ifstream in(TOLLGATE_SOURCE_DIR "/Dockerfile");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("./scripts/setup.sh"), std::string::npos);
  EXPECT_NE(text.find("--target tollgate"), std::string::npos);
}

}  // namespace
