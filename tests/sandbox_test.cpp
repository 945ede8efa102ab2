// The sandbox suite (docs/sandbox.md): commands and CLI tools run under
// bubblewrap. They see their own workspace and nothing else of the data
// directory, write nowhere else, have no network, and leave no process
// behind (setsid or not). Option tricks that start a shell are refused, and
// without bubblewrap nothing runs at all.
#include "execute/sandbox.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include "audit/event_log.h"
#include "tests/child_process.h"
#include "tests/execute_test_util.h"

namespace tollgate {

std::string RefusedOption(const std::vector<std::string>& argv);

namespace {

using testing::SurvivorsAfterTeardown;
using testing::ToolFixture;

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// A TCP server on 127.0.0.1 that counts the connections it accepts.
class Canary {
 public:
  Canary() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 20) == 1) {
          int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) ++hits_, close(c);
        }
      }
    });
  }
  ~Canary() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int hits() const { return hits_; }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> hits_{0};
  std::thread thread_;
};

class SandboxTest : public ::testing::Test, public ToolFixture {
 protected:
  void SetUp() override {
    helper_ = AllowExecHelper(EXEC_HELPER);
    policy().limits.timeout_ms = 5000;
    policy().cli_limits.timeout_ms = 5000;
    tag_ = UniqueTag();
    tools_ = dir().sub("tools");
    policy().tools_dir = tools_;
  }
  Json Cmd(const std::string& command, const Json& args, const std::string& stdin_data = "") {
    Json a{{"command", command}, {"args", args}};
    if (!stdin_data.empty()) a["stdin"] = stdin_data;
    return Call("execute_command", a);
  }
  // Runs `script` as the CLI tool cli:<name>.
  Json Cli(const std::string& name, const std::string& script, const Json& args = Json::object()) {
    std::filesystem::create_directories(tools_ + "/" + name);
    std::ofstream(tools_ + "/" + name + "/run") << script;
    std::filesystem::permissions(tools_ + "/" + name + "/run", std::filesystem::perms(0755));
    ToolRegistry reg(tools_);
    reg.Reload();
    auto t = reg.Find("cli:" + name);
    if (!t) return Json{{"success", false}, {"error", {{"code", "NO_SUCH_TOOL"}}}};
    return t->Run(args, Ctx());
  }
  static std::string Out(const Json& r) {
    return r.contains("data") && r["data"].is_object() ? r["data"].value("stdout", "") : "";
  }
  std::string helper_, tag_, tools_;
};

TEST_F(SandboxTest, ACommandCannotReadAnotherAgentsWorkspace) {
  Write(workspace("o2", "victim") + "/secret.txt", "SECRET-of-o2");
  Write(workspace() + "/notes.txt", "mine");
  Json r = Cmd("cat", {"notes.txt"});
  ASSERT_TRUE(r["success"]) << "relative paths name the workspace: " << r.dump();
  EXPECT_EQ(Out(r), "mine");
  for (const std::string& p :
       {std::string("../../o2/victim/secret.txt"), workspace("o2", "victim") + "/secret.txt"}) {
    r = Cmd("cat", {p});
    EXPECT_FALSE(r["success"]) << p;
    EXPECT_EQ(Out(r).find("SECRET"), std::string::npos) << p;
  }
  r = Cmd("ls", {"-a", "../.."});
  EXPECT_EQ(Out(r).find("o2"), std::string::npos) << "other orgs are not even listed: " << Out(r);
  r = Cmd("grep", {"-r", "SECRET-of-o2", dir().path(), "../.."});
  EXPECT_EQ(Out(r).find("SECRET"), std::string::npos);
  r = Cmd("cat", {"/etc/shadow"});
  EXPECT_FALSE(r["success"]) << "only a few /etc files are visible";
}

// As root with run_as "" bwrap runs as root and reaches the paths itself
// (--bind-fd instead of the staged mounts): the same confinement.
TEST_F(SandboxTest, WithoutAUserSwitchTheConfinementIsTheSame) {
  policy().run_as = "";
  Write(workspace("o2", "victim") + "/secret.txt", "SECRET-of-o2");
  Json r = Cmd("sort", {"-o", "sorted.txt"}, "b\na\n");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Exists(workspace() + "/sorted.txt"));
  for (const std::string& p :
       {std::string("../../o2/victim/secret.txt"), workspace("o2", "victim") + "/secret.txt"}) {
    r = Cmd("cat", {p});
    EXPECT_EQ(Out(r).find("SECRET"), std::string::npos) << p;
  }
  r = Cmd("sort", {"-o", dir().sub("outside.txt")}, "x\n");
  EXPECT_FALSE(Exists(dir().sub("outside.txt"))) << r.dump();
  r = Cli("who", "#!/bin/sh\ncat >/dev/null\necho \"{\\\"cwd\\\": \\\"$(pwd)\\\"}\"\n");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["cwd"], workspace());
}

TEST_F(SandboxTest, ACommandCannotReadTheLog) {
  // As RocksDB leaves its WAL: a 0644 file under the data directory.
  Write(dir().sub("log") + "/000004.log", "event SECRET-IN-WAL of org o2");
  chmod((dir().sub("log") + "/000004.log").c_str(), 0644);
  for (const std::string& where : {std::string("../../../log"), dir().sub("log"), dir().path()}) {
    Json r = Cmd("grep", {"-r", "-a", "SECRET-IN-WAL", where});
    EXPECT_FALSE(r["success"]) << where;
    EXPECT_EQ(Out(r).find("SECRET"), std::string::npos) << where << ": " << r.dump();
  }
}

TEST(SandboxLog, TheLogDirectoryIsPrivateEvenWhenItExistedWider) {
  testing::TempDir d;
  const std::string path = d.sub("log");
  std::filesystem::create_directories(path);
  chmod(path.c_str(), 0755);
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(EventLog::Open(path, LogOptions{}, &log).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(SandboxTest, ACommandCannotWriteOutsideItsWorkspace) {
  std::filesystem::create_directories(workspace("o2", "victim"));
  const std::string host_tmp = "/tmp/" + tag_;
  const std::vector<std::pair<std::string, std::string>> targets = {
      {host_tmp, host_tmp},
      {dir().sub("outside.txt"), dir().sub("outside.txt")},
      {workspace("o2", "victim") + "/planted.txt", workspace("o2", "victim") + "/planted.txt"},
      {"../planted.txt", workspace() + "/../planted.txt"},
      {"/planted.txt", "/planted.txt"}};
  for (const auto& [arg, host] : targets) {
    Json r = Cmd("sort", {"-o", arg}, "b\na\n");
    EXPECT_FALSE(Exists(host)) << arg << " was written: " << r.dump();
    std::filesystem::remove(host);
  }
  // The workspace itself is writable.
  Json r = Cmd("sort", {"-o", "sorted.txt"}, "b\na\n");
  ASSERT_TRUE(r["success"]) << r.dump();
  std::ifstream in(workspace() + "/sorted.txt");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), "a\nb\n");
}

TEST_F(SandboxTest, AToolCannotOpenASocket) {
  Canary canary;
  ASSERT_GT(canary.port(), 0);
  Json r = Cli("dial",
               "#!/usr/bin/python3\n"
               "import json, socket, sys\n"
               "sys.stdin.read()\n"
               "try:\n"
               "    socket.create_connection(('127.0.0.1', " +
                   std::to_string(canary.port()) +
                   "), timeout=2).close()\n"
                   "    print(json.dumps({'connected': True}))\n"
                   "except OSError as e:\n"
                   "    print(json.dumps({'connected': False, 'error': str(e)}))\n");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_FALSE(r["data"]["connected"]) << r.dump();
  // A connection of our own, after the tool's: once the canary has counted
  // it, it has counted the tool's too, had there been one.
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(canary.port()));
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  testing::WaitUntil([&] { return canary.hits() >= 1; }, std::chrono::seconds(5));
  close(c);
  EXPECT_EQ(canary.hits(), 1) << "only the test's own connection reached the canary";
}

TEST_F(SandboxTest, ASetsidGrandchildDiesWithTheCall) {
  Json r = Cmd(helper_, {"setsid", tag_});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(SurvivorsAfterTeardown(tag_), 0) << "the child that left the process group died with the sandbox";

  std::random_device rd;
  const std::string secs = "59." + std::to_string(100000 + rd() % 800000);
  std::string pattern = secs;
  pattern.replace(2, 1, "[.]");  // so that grep does not find itself
  r = Cli("detach", "#!/bin/sh\ncat >/dev/null\nsetsid sleep " + secs +
                        " </dev/null >/dev/null 2>&1 &\n"
                        "until grep -qs '" +
                        pattern +
                        "' /proc/[0-9]*/cmdline; do :; done\n"
                        "echo '{\"started\": true}'\n");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(SurvivorsAfterTeardown(secs), 0) << "`setsid sleep " << secs << "` outlived the call";
}

TEST_F(SandboxTest, SortsCompressProgramIsRefusedUnderAnyAbbreviation) {
  const std::string payload = "id > pwned\n" + std::string(8192, '#') + "\n";
  for (const Json& args :
       {Json{"--compress-prog=sh", "-S", "1K", "-T", "/tmp"}, Json{"--compress-p", "sh", "-S", "1K"},
        Json{"--co=sh"}, Json{"--compress-program=sh"}}) {
    Json r = Cmd("sort", args, payload);
    EXPECT_EQ(Code(r), "E_CMD_NOT_ALLOWED") << args.dump() << " " << r.dump();
  }
  // Under another name, the rules of the file it resolves to.
  std::filesystem::create_symlink("/usr/bin/sort", dir().sub("srt"));
  policy().command_allowlist.push_back(dir().sub("srt"));
  EXPECT_EQ(Code(Cmd(dir().sub("srt"), {"--compress-prog=sh"}, payload)), "E_CMD_NOT_ALLOWED");
  EXPECT_FALSE(Exists(workspace() + "/pwned"));
  Json r = Cmd("sort", {"-r"}, "a\nb\n");
  EXPECT_EQ(Out(r), "b\na\n") << "other options still work: " << r.dump();
}

TEST(OptionRules, OptionsThatRunAProgramAreRecognisedInEveryForm) {
  using V = std::vector<std::string>;
  for (const V& refused : {V{"sort", "--compress-prog=sh"},
                           V{"sort", "--c", "sh"},
                           V{"tar", "cIf", "sh", "x.tar"},
                           V{"tar", "-xvI", "sh"},
                           V{"tar", "--to-com=sh"},
                           V{"tar", "-F", "x"},
                           V{"tar", "cf", "x.tar", "--checkpoint-act=exec=sh", "."},
                           V{"find", ".", "-execdir", "id", ";"},
                           V{"find", ".", "-fprintf", "x", "%p"},
                           V{"diff", "-l", "a", "b"},
                           V{"diff", "--pag", "a", "b"},
                           V{"git", "-c", "core.pager=sh", "log"},
                           V{"git", "--upload-p=sh"},
                           V{"rsync", "-e", "sh"},
                           V{"split", "--fil=sh"},
                           V{"/usr/bin/sort", "--compress-program", "sh"},
                           V{"anything", "--compress-prog=sh"},
                           V{"anything", "--to-command", "sh"},
                           V{"anything", "--to-c=sh"},
                           V{"anything", "--pager=sh"}}) {
    EXPECT_NE(RefusedOption(refused), "") << ::testing::PrintToString(refused);
  }
  for (const V& fine :
       {V{"sort", "-r", "--check"}, V{"sort", "-o", "out.txt", "-S", "1K"}, V{"ls", "--color=auto"},
        V{"grep", "--fixed-strings", "-r", "x"}, V{"tar", "cf", "x.tar", "."}, V{"diff", "-u", "a", "b"},
        V{"anything", "--co"}, V{"cat", "-n"}, V{"rsync", "--compress"}, V{"anything", "--compress"},
        V{"anything", "--check"}}) {
    EXPECT_EQ(RefusedOption(fine), "") << ::testing::PrintToString(fine);
  }
}

// bwrap's init exits with 128 + S for a program killed by signal S.
TEST_F(SandboxTest, AProgramKilledByASignalIsReportedAsKilled) {
  Json r = Cli("suicide", "#!/bin/sh\nkill -KILL $$\n");
  EXPECT_EQ(Code(r), "E_TOOL_EXEC");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("killed by signal 9"), std::string::npos)
      << r.dump();
}

TEST_F(SandboxTest, WithoutBubblewrapNothingRunsUnconfined) {
  struct Restore {
    std::string was = SandboxProgram();
    ~Restore() { SetSandboxProgram(was); }
  } restore;
  SetSandboxProgram(dir().sub("no-such-bwrap"));
  Json r = Cmd("sort", {"-o", "ran.txt"}, "x\n");
  EXPECT_EQ(Code(r), "E_SANDBOX_UNAVAILABLE") << r.dump();
  r = Cli("marker", "#!/bin/sh\ntouch ran-cli\necho '{}'\n");
  EXPECT_EQ(Code(r), "E_SANDBOX_UNAVAILABLE") << r.dump();
  EXPECT_FALSE(Exists(workspace() + "/ran.txt"));
  EXPECT_FALSE(Exists(workspace() + "/ran-cli"));
}

}  // namespace
}  // namespace tollgate
