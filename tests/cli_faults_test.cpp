// Faults a new user met with the CLI (issue 31), through the real
// `tollgate` binary beside an in-process pipeline (its HTTP API found
// through DATA/endpoints.json, as a user's `up` would be):
//   - concurrent first uses of one new agent register one key, and every
//     submit succeeds (docs/trust.md);
//   - `approvals list` on a terminal shows full request ids and the call's
//     arguments (docs/approvals.md).
#include <gtest/gtest.h>
#include <pty.h>

#include <filesystem>

#include "audit/approvals.h"
#include "audit/audit_query.h"
#include "deploy/pipeline.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

using namespace std::chrono_literals;
using testing::WaitUntil;

class CliFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PipelineOptions o;
    o.data_dir = data_;
    o.durability = Durability::kBuffered;
    o.http_listen = "127.0.0.1:0";
    ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
  }
  void TearDown() override {
    if (p_) testing::ExpectEveryEventConforms(p_->log().store());
    p_.reset();
  }

  std::vector<Event> CredentialsAdded(const std::string& org) {
    AuditQuery q;
    q.org_id = org;
    q.types = {"credential.added"};
    std::vector<Event> out;
    EXPECT_TRUE(ForEachEvent(p_->log().store(), q, [&](Event& e) { out.push_back(e); }).ok());
    return out;
  }

  bool Has(const std::string& org, const std::string& rid, const std::string& type) {
    std::vector<Event> events;
    StoreLogView view(p_->log().store());
    if (!view.EventsOfRequest(org, rid, &events).ok()) return false;
    for (const Event& e : events) {
      if (e.type == type) return true;
    }
    return false;
  }

  testing::TempDir dir_;
  const std::string data_ = dir_.sub("data");
  std::unique_ptr<Pipeline> p_;
};

TEST_F(CliFaultsTest, TwentyConcurrentFirstSubmitsOfANewAgentShareOneKeyAndAllSucceed) {
  constexpr int kSubmits = 20;
  std::vector<std::unique_ptr<testing::ChildProcess>> submits;
  for (int i = 0; i < kSubmits; ++i) {
    auto c = std::make_unique<testing::ChildProcess>();
    const std::string n = std::to_string(i);
    ASSERT_TRUE(c->Start(
        {TOLLGATE_BIN, "submit", "--data", data_, "--org", "o1", "--agent", "newcomer", "--session", "s",
         "--tool", "echo", "--args", R"({"text":"hi )" + n + R"("})", "--request-id", "first-" + n},
        dir_.sub("submit" + n + ".out"), dir_.sub("submit" + n + ".err")));
    submits.push_back(std::move(c));
  }
  for (int i = 0; i < kSubmits; ++i) {
    auto code = submits[i]->Wait(90s);
    ASSERT_TRUE(code.has_value()) << "submit " << i << " still runs: " << submits[i]->err();
    EXPECT_EQ(*code, 0) << "submit " << i << ": " << submits[i]->out() << submits[i]->err();
  }
  // Each ran as the agent: signed with a key the log knew by then.
  for (int i = 0; i < kSubmits; ++i) {
    EXPECT_TRUE(
        WaitUntil([&] { return Has("o1", "first-" + std::to_string(i), "execution.completed"); }, 30s))
        << "first-" << i << " was not run as o1/newcomer";
  }
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(data_ + "/keys/o1")) {
    files.push_back(f.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{"newcomer.pem"}) << "one key file, no temporary left";
  const std::vector<Event> added = CredentialsAdded("o1");
  ASSERT_EQ(added.size(), 1u) << "one credential.added for the agent";
  EXPECT_EQ(added[0].data["identity"], "newcomer");
  EXPECT_EQ(added[0].data["kind"], "agent_key");
}

// Runs `argv` with its stdout on a pseudo-terminal (so isatty says yes);
// returns what it wrote there, once it has exited, or "" on a failure.
std::string RunOnTerminal(const std::vector<std::string>& argv, int* exit_code) {
  int master = -1;
  struct winsize ws {};
  ws.ws_row = 50;
  ws.ws_col = 120;
  const pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  if (pid < 0) return "";
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDERR_FILENO);  // the "N pending" line is not the table's
    execv(args[0], args.data());
    _exit(127);
  }
  std::string out;
  char buf[4096];
  for (;;) {  // EIO once the child has exited and its side is closed
    const ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST_F(CliFaultsTest, ApprovalsListOnATerminalShowsFullRequestIdsAndTheCallsArguments) {
  const std::string id = "a-request-id-longer-than-the-old-column-" + std::string(40, '7');
  const std::string content = "start-" + std::string(300, 'c') + "-unseen-tail";
  const Json args{{"path", "notes.txt"}, {"content", content}};
  testing::ChildProcess submit;
  ASSERT_TRUE(
      submit.Start({TOLLGATE_BIN, "submit", "--data", data_, "--org", "o1", "--agent", "a1", "--session", "s",
                    "--tool", "write_file", "--args", args.dump(), "--request-id", id},
                   dir_.sub("submit.out"), dir_.sub("submit.err")));
  auto code = submit.Wait(60s);
  ASSERT_TRUE(code.has_value() && *code == 0) << submit.out() << submit.err();
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::vector<PendingApproval> pending;
        return ListPendingApprovals(p_->log().store(), {}, &pending).ok() && pending.size() == 1;
      },
      30s));

  int rc = -1;
  const std::string table = RunOnTerminal({TOLLGATE_BIN, "approvals", "list", "--data", data_}, &rc);
  EXPECT_EQ(rc, 0) << table;
  EXPECT_NE(table.find("REQUEST"), std::string::npos) << "a table, not JSON lines: " << table;
  EXPECT_NE(table.find(id), std::string::npos) << "the whole id: " << table;
  EXPECT_NE(table.find(R"(args {"content":"start-ccc)"), std::string::npos) << "the arguments: " << table;
  EXPECT_EQ(table.find("unseen-tail"), std::string::npos) << "arguments are cut to 200 characters: " << table;
  EXPECT_NE(table.find("more characters"), std::string::npos) << "and say they are: " << table;

  // Piped, the output stays JSON lines, one per approval, whole.
  testing::ChildProcess piped;
  ASSERT_TRUE(piped.Start({TOLLGATE_BIN, "approvals", "list", "--data", data_}, dir_.sub("list.out"),
                          dir_.sub("list.err")));
  code = piped.Wait(30s);
  ASSERT_TRUE(code.has_value() && *code == 0) << piped.err();
  const Json line = Json::parse(piped.out());
  EXPECT_EQ(line["request_id"], id);
  EXPECT_EQ(line["request"]["args"]["content"], content);
}

}  // namespace
}  // namespace tollgate
