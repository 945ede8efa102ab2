// Execute enforces the policy in force (docs/policy.md, "Live edits"): a
// live edit of the execute section applies to every later call, and a file
// whose execute section would not load is never logged as in force.
// Network traffic goes only to a loopback server that counts its hits.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <map>
#include <thread>

#include "decide/decide_stage.h"
#include "execute/config.h"
#include "tests/pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::TempDir;

class CountingServer {
 public:
  CountingServer() {
    server_.Get(".*", [this](const httplib::Request&, httplib::Response& res) {
      ++hits_;
      res.set_content("ok", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~CountingServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  int hits() const { return hits_.load(); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> hits_{0};
};

std::string PolicyText(const std::string& cidrs, bool writes) {
  return std::string(R"(version: 1
mode: ask
allow: ["http_request:*", "builtin:write_file"]
tools:
  http_request: {danger: LOW, read_only: false}
  write_file: {danger: LOW, read_only: false}
http_request:
  allowed_methods: [GET]
execute:
  writes_enabled: )") +
         (writes ? "true" : "false") + R"(
  network: {allow_cidrs: )" +
         cidrs + R"(, max_redirects: 0}
)";
}

class LivePolicyTest : public testing::PolicyPipelineTest {
 protected:
  void SetUp() override { StartWith(PolicyText(R"(["127.0.0.0/8"])", true)); }
  size_t PolicyEvents() {
    size_t n = 0;
    for (uint64_t seq = 1; seq <= p_->log().head_seq(); ++seq) {
      Event e;
      n += p_->log().store().ReadEvent(seq, &e).ok() && e.type == "policy.updated";
    }
    return n;
  }
  // Rewrites the policy file and waits until decide logged it in force.
  void Edit(const std::string& text) {
    const size_t before = PolicyEvents();
    // A distinct mtime even on coarse clocks, then the new content.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // Written beside it and renamed over it, as an editor saves: decide
    // must never read a half-written file (a truncated one can still load,
    // as a different policy).
    std::ofstream(dir_.sub("policy.yaml.new"), std::ios::trunc) << text;
    std::filesystem::rename(dir_.sub("policy.yaml.new"), dir_.sub("policy.yaml"));
    for (int i = 0; i < 400 && PolicyEvents() <= before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    ASSERT_GT(PolicyEvents(), before) << "the edit was not logged";
  }
};

TEST_F(LivePolicyTest, ALiveEditOfTheExecuteSectionAppliesToTheNextCall) {
  CountingServer server;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/x";
  Json r = Call("fetch-1", "http_request", {{"method", "GET"}, {"url", url}});
  ASSERT_EQ(r["status"], "completed") << r.dump();
  EXPECT_EQ(server.hits(), 1);
  r = Call("write-1", "write_file", {{"path", "a.txt"}, {"content", "one"}});
  ASSERT_EQ(r["status"], "completed") << r.dump();

  // Loopback no longer allowed: the next fetch is refused before connecting.
  Edit(PolicyText("[]", true));
  r = Call("fetch-2", "http_request", {{"method", "GET"}, {"url", url}});
  EXPECT_EQ(r["status"], "failed") << r.dump();
  EXPECT_EQ(r["result"]["error"]["code"], "E_URL_FORBIDDEN") << r.dump();
  EXPECT_EQ(server.hits(), 1) << "the server must see nothing after the edit";

  // Writes off: the next write is denied at decide (it could not run).
  Edit(PolicyText("[]", false));
  r = Call("write-2", "write_file", {{"path", "b.txt"}, {"content", "two"}});
  EXPECT_EQ(r["status"], "denied") << r.dump();
  EXPECT_EQ(r["result"]["error"]["code"], "E_WRITE_DISABLED") << r.dump();
  EXPECT_EQ(r["result"]["error"]["alias"], "E_WRITES_DISABLED") << "the old name, for old callers";
  EXPECT_EQ(r["decision"]["rule"], "registry:writes-disabled") << r.dump();
  EXPECT_EQ(server.hits(), 1);
}

// Execute tells decide which CLI tools it has (tools.available, at start):
// a cli: tool it lacks is denied at decide, and no approver is asked for a
// call that could never run.
TEST_F(LivePolicyTest, ACliToolNoExecutorHasIsDeniedAtDecideAndNoApproverIsAsked) {
  auto said = [&] {
    for (uint64_t seq = 1; seq <= p_->log().head_seq(); ++seq) {
      Event e;
      if (p_->log().store().ReadEvent(seq, &e).ok() && e.type == "tools.available") return true;
    }
    return false;
  };
  for (int i = 0; i < 400 && !said(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(said()) << "execute never said which CLI tools it has";
  Json r = Call("ghost-1", "cli:ghost", Json::object());
  EXPECT_EQ(r["status"], "denied") << r.dump();
  EXPECT_EQ(r["decision"]["rule"], "registry:no-executor") << r.dump();
  EXPECT_EQ(r["result"]["error"]["code"], "E_UNKNOWN_TOOL") << r.dump();
  for (uint64_t seq = 1; seq <= p_->log().head_seq(); ++seq) {
    Event e;
    ASSERT_TRUE(p_->log().store().ReadEvent(seq, &e).ok());
    EXPECT_FALSE(e.request_id == "ghost-1" && e.type == "approval.requested") << "an approver was asked";
  }
}

// A LogView with nothing in it: Tick does not read the log.
class EmptyLog : public LogView {
 public:
  Status EventsOfRequest(const std::string&, const std::string&, std::vector<Event>*) const override {
    return Status::Ok();
  }
};

TEST(LivePolicy, AFileWhoseExecuteSectionDoesNotLoadIsNeverLoggedAsInForce) {
  TempDir dir;
  const std::string path = dir.sub("policy.yaml");
  DecideConfig c;
  c.policy_path = path;
  c.validate = [&dir](const Json& doc) {
    ExecutePolicy unused;
    return ExecutePolicyFromJson(doc, dir.path(), &unused);
  };
  DecideStage stage(c);
  EmptyLog log;
  std::ofstream(path) << PolicyText(R"(["not-a-cidr"])", true);
  StageResult r = stage.Tick({1, ""}, log);
  EXPECT_TRUE(r.events.empty()) << "a bad execute section is refused at reload";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a distinct mtime for the rewrite
  std::ofstream(path, std::ios::trunc) << PolicyText(R"(["127.0.0.0/8"])", true);
  r = stage.Tick({2, ""}, log);
  ASSERT_EQ(r.events.size(), 1u) << "the same file with a valid section is logged";
  EXPECT_EQ(r.events[0].type, "policy.updated");
}

}  // namespace
}  // namespace tollgate
