// compose.yaml: no Docker engine runs here, so check what can be checked —
// the file parses, the services are wired, and the tollgate service's
// command is a valid `tollgate` invocation (run with --check).
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <fstream>

#include "core/canonical_json.h"

extern char** environ;

namespace {
using tollgate::Json;
using tollgate::ParseJson;

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

// The directory `command` names with --data is on one of `service`'s volumes.
bool DataOnVolume(const YAML::Node& service, const std::vector<std::string>& command) {
  for (size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] != "--data") continue;
    for (const auto& v : service["volumes"]) {
      if (v.as<std::string>().find(":" + command[i + 1]) != std::string::npos) return true;
    }
  }
  return false;
}

// Runs `command` (its "tollgate" replaced by the built binary) with --check.
std::string Check(std::vector<std::string> command) {
  command[0] = TOLLGATE_BIN;
  command.push_back("--check");
  std::string out;
  EXPECT_EQ(RunProcess(command, &out), 0) << out;
  return out;
}

TEST(Compose, RunsEveryStageAsAServiceWithValidCommands) {
  YAML::Node doc = YAML::LoadFile(TOLLGATE_SOURCE_DIR "/compose.yaml");
  ASSERT_TRUE(doc["services"]["kafka"]) << "a Kafka service";
  std::string key;
  for (const char* stage : {"ingest", "decide", "approve", "execute"}) {
    YAML::Node svc = doc["services"][stage];
    ASSERT_TRUE(svc) << stage;
    auto command = svc["command"].as<std::vector<std::string>>();
    ASSERT_GE(command.size(), 3u);
    EXPECT_EQ(command[0], "tollgate");
    EXPECT_EQ(command[1], "stage");
    EXPECT_EQ(command[2], stage);
    const std::string out = Check(command);
    EXPECT_NE(out.find("\"brokers\":\"kafka:9092\""), std::string::npos) << out;
    // Every stage is given the keeper's deployment key.
    Json conf;
    ASSERT_TRUE(ParseJson(out, &conf).ok()) << out;
    EXPECT_FALSE(conf["deployment_key"].get<std::string>().empty()) << stage;
    if (key.empty()) key = conf["deployment_key"];
    EXPECT_EQ(conf["deployment_key"], key) << stage;
  }
  EXPECT_EQ(doc["services"]["execute"]["deploy"]["replicas"].as<int>(), 2);

  // The keeper: the audit log on a volume, the HTTP API published.
  YAML::Node keeper = doc["services"]["keeper"];
  ASSERT_TRUE(keeper);
  EXPECT_EQ(keeper["depends_on"]["kafka"]["condition"].as<std::string>(), "service_healthy");
  auto command = keeper["command"].as<std::vector<std::string>>();
  EXPECT_EQ(command[2], "audit");
  EXPECT_TRUE(DataOnVolume(keeper, command));
  Json conf;
  ASSERT_TRUE(ParseJson(Check(command), &conf).ok());
  EXPECT_EQ(conf["deployment_key"], key);
  EXPECT_EQ(conf["http"], "0.0.0.0:8080");

  // And --check does refuse a bad invocation, so the test can fail.
  std::string bad_out;
  EXPECT_NE(
      RunProcess({TOLLGATE_BIN, "stage", "judge", "--brokers", "b", "--data", "d", "--check"}, &bad_out), 0);
  EXPECT_NE(RunProcess({TOLLGATE_BIN, "stage", "decide", "--data", "d", "--check"}, &bad_out), 0);
}

TEST(Compose, KeepsTheSingleProcessDeploymentAsAProfile) {
  YAML::Node doc = YAML::LoadFile(TOLLGATE_SOURCE_DIR "/compose.yaml");
  YAML::Node tollgate = doc["services"]["tollgate"];
  ASSERT_TRUE(tollgate);
  EXPECT_EQ(tollgate["profiles"][0].as<std::string>(), "single");
  EXPECT_EQ(tollgate["depends_on"]["kafka"]["condition"].as<std::string>(), "service_healthy");
  auto command = tollgate["command"].as<std::vector<std::string>>();
  ASSERT_GE(command.size(), 2u);
  EXPECT_EQ(command[1], "up");
  EXPECT_TRUE(DataOnVolume(tollgate, command));
  const std::string out = Check(command);
  EXPECT_NE(out.find("\"brokers\":\"kafka:9092\""), std::string::npos) << out;
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
