// Restarts of `tollgate up` (issue 31), through the real binary:
//   - `up --broker-port P --http 127.0.0.1:Q` listens where it is told, and
//     a restart without flags reuses the last run's ports when they are
//     free, and says so when one is not;
//   - a `submit --wait` waiting for an approval gets its result across a
//     restart of `up` (SIGTERM, and SIGKILL), and the tool runs once.
// Only loopback addresses are used. TOLLGATE_UP_RESTART_BIN runs the
// tests against another `tollgate` (to see them fail on an older one).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "api/api_client.h"
#include "audit/log_sink.h"
#include "audit/log_store.h"
#include "deploy/endpoints.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::WaitUntil;

std::string Bin() {
  const char* other = std::getenv("TOLLGATE_UP_RESTART_BIN");
  return other != nullptr && *other ? other : TOLLGATE_BIN;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A socket listening on 127.0.0.1:port (0: any); closed on destruction.
class Listener {
 public:
  explicit Listener(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && listen(fd_, 4) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A fresh directory, removed on destruction. (testing::TempDir's header and
// child_process.h both define WaitUntil: one of them is enough here.)
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tollgate-up-restart-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A port that was free a moment ago.
int FreePort() { return Listener(0).port(); }

class UpRestartTest : public ::testing::Test {
 protected:
  // Starts `up` on data_ and waits for its banner (printed once
  // endpoints.json is written).
  void StartUp(const std::string& name, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {Bin(), "up", "--data", data_, "--durability", "buffered"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    up_ = std::make_unique<ChildProcess>();
    ASSERT_TRUE(up_->Start(argv, dir_.sub(name + ".out"), dir_.sub(name + ".err")));
    ASSERT_TRUE(WaitUntil([&] { return up_->Poll() || Contains(up_->out(), "Ctrl-C stops"); }, 60s) &&
                !up_->Poll())
        << up_->out() << up_->err();
  }
  // Signals the running `up` (its pid from endpoints.json) and waits for its end.
  void StopUp(int sig) {
    const int pid = Endpoints().value("pid", 0);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, sig), 0);
    auto code = up_->Wait(30s);
    ASSERT_TRUE(code.has_value()) << "`up` still runs after signal " << sig;
    if (sig == SIGTERM) {
      EXPECT_EQ(*code, 0) << up_->out() << up_->err();
    }
  }
  Json Endpoints() {
    Json ep;
    EXPECT_TRUE(ReadEndpoints(data_, &ep).ok());
    return ep;
  }
  // Runs a `tollgate` command to its end; its exit code (-1: still running
  // after 60 s, or killed), stdout in *out.
  int Run(const std::string& name, std::vector<std::string> args, std::string* out) {
    args.insert(args.begin(), Bin());
    ChildProcess c;
    if (!c.Start(args, dir_.sub(name + ".out"), dir_.sub(name + ".err"))) return -1;
    auto code = c.Wait(60s);
    *out = c.out() + c.err();
    return code.value_or(-1);
  }
  // Events of one request in the log `up` left (read once it has stopped).
  int CountEvents(const std::string& rid, const std::string& type) {
    std::unique_ptr<LogStore> store;
    EXPECT_TRUE(LogStore::Open(data_ + "/log", OpenMode::kReadOnly, &store).ok());
    if (!store) return -1;
    std::vector<Event> events;
    EXPECT_TRUE(StoreLogView(*store).EventsOfRequest("default", rid, &events).ok());
    int n = 0;
    for (const Event& e : events) n += e.type == type;
    return n;
  }

  // The waiting submit gets its result across a restart of `up` by `sig`.
  void SubmitWaitSurvivesRestart(int sig);

  ScratchDir dir_;
  const std::string data_ = dir_.sub("data");
  std::unique_ptr<ChildProcess> up_;
};

TEST_F(UpRestartTest, UpListensOnThePinnedPortsAndReusesThemAfterARestart) {
  const int broker_port = FreePort();
  const int http_port = FreePort();
  const std::string broker = "127.0.0.1:" + std::to_string(broker_port);
  const std::string http = "http://127.0.0.1:" + std::to_string(http_port);
  ASSERT_NO_FATAL_FAILURE(StartUp("up1", {"--broker-port", std::to_string(broker_port), "--http",
                                          "127.0.0.1:" + std::to_string(http_port)}));
  Json ep = Endpoints();
  EXPECT_EQ(ep.value("bootstrap", ""), broker);
  EXPECT_EQ(ep.value("http", ""), http);
  EXPECT_TRUE(Contains(up_->out(), "broker     " + broker)) << up_->out();
  EXPECT_TRUE(ApiAnswers(http)) << "the API answers on the port it was given";
  std::string out;
  EXPECT_EQ(Run("echo",
                {"submit", "--data", data_, "--brokers", broker, "--agent", "a1", "--session", "s", "--tool",
                 "echo", "--args", R"({"text":"pinned"})", "--wait"},
                &out),
            0)
      << "the broker answers on the port it was given: " << out;
  ASSERT_NO_FATAL_FAILURE(StopUp(SIGTERM));

  // Restarted without flags while the broker's last port is taken: the
  // HTTP port is reused, the broker gets another and the banner says so.
  Listener squatter(broker_port);
  ASSERT_EQ(squatter.port(), broker_port);
  ASSERT_NO_FATAL_FAILURE(StartUp("up2", {}));
  ep = Endpoints();
  EXPECT_EQ(ep.value("http", ""), http);
  EXPECT_NE(ep.value("bootstrap", ""), broker);
  EXPECT_TRUE(Contains(up_->out(), "the last run's broker port " + std::to_string(broker_port) + " is taken"))
      << up_->out();
  EXPECT_FALSE(Contains(up_->out(), "HTTP port")) << up_->out();
  ASSERT_NO_FATAL_FAILURE(StopUp(SIGTERM));
}

void UpRestartTest::SubmitWaitSurvivesRestart(int sig) {
  ASSERT_NO_FATAL_FAILURE(StartUp("up1", {}));
  const Json before = Endpoints();
  // write_file asks a human (the shipped policy): the submit waits.
  const std::string rid = "across-a-restart";
  ChildProcess submit;
  ASSERT_TRUE(submit.Start(
      {Bin(), "submit", "--data", data_, "--agent", "a1", "--session", "s", "--tool", "write_file", "--args",
       R"({"path":"notes.txt","content":"once"})", "--request-id", rid, "--wait", "--timeout", "60"},
      dir_.sub("submit.out"), dir_.sub("submit.err")));
  ASSERT_TRUE(WaitUntil([&] { return submit.Poll() || Contains(submit.err(), "awaits approval"); }, 30s) &&
              !submit.Poll())
      << submit.out() << submit.err();

  ASSERT_NO_FATAL_FAILURE(StopUp(sig));
  ASSERT_NO_FATAL_FAILURE(StartUp("up2", {}));
  const Json after = Endpoints();
  EXPECT_NE(after.value("pid", 0), before.value("pid", 0));
  EXPECT_EQ(after.value("bootstrap", ""), before.value("bootstrap", "")) << "the broker's port is reused";
  EXPECT_EQ(after.value("http", ""), before.value("http", "")) << "the API's port is reused";

  std::string out;
  ASSERT_EQ(Run("approve", {"approvals", "approve", rid, "--data", data_}, &out), 0) << out;
  auto code = submit.Wait(30s);
  ASSERT_TRUE(code.has_value()) << "submit still waits after the approval\n" << submit.err();
  EXPECT_EQ(*code, 0) << submit.out() << submit.err();
  const Json result = Json::parse(submit.out(), nullptr, false);
  EXPECT_EQ(result.value("status", ""), "completed") << submit.out();
  EXPECT_EQ(result.value("request_id", ""), rid) << submit.out();
  EXPECT_TRUE(Contains(submit.err(), "the gate restarted")) << submit.err();

  ASSERT_NO_FATAL_FAILURE(StopUp(SIGTERM));
  EXPECT_EQ(CountEvents(rid, "request.received"), 1);
  EXPECT_EQ(CountEvents(rid, "execution.started"), 1) << "the tool ran once";
}

TEST_F(UpRestartTest, SubmitWaitGetsItsResultAcrossASigtermRestartOfUp) {
  SubmitWaitSurvivesRestart(SIGTERM);
}

TEST_F(UpRestartTest, SubmitWaitGetsItsResultAcrossASigkillRestartOfUp) {
  SubmitWaitSurvivesRestart(SIGKILL);
}

}  // namespace
}  // namespace tollgate
