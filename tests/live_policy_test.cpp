// Execute enforces the policy in force (docs/policy.md, "Live edits"): a
// live edit of the execute section applies to every later call, and a file
// whose execute section would not load is never logged as in force.
// Network traffic goes only to a loopback server that counts its hits.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "core/sha256.h"
#include "decide/decide_stage.h"
#include "execute/config.h"
#include "tests/child_process.h"
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
    testing::WaitUntil([this] { return server_.is_running(); }, std::chrono::seconds(1));
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
    // Written beside it and renamed over it, as an editor saves: decide
    // must never read a half-written file (a truncated one can still load,
    // as a different policy).
    const std::string fresh = dir_.sub("policy.yaml.new"), path = dir_.sub("policy.yaml");
    std::ofstream(fresh, std::ios::trunc) << text;
    // A distinct mtime even on coarse clocks (decide looks at mtime and size).
    std::filesystem::last_write_time(fresh, std::filesystem::last_write_time(path) + std::chrono::seconds(1));
    std::filesystem::rename(fresh, path);
    testing::WaitUntil([&] { return PolicyEvents() > before; }, std::chrono::seconds(10));
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
  testing::WaitUntil(said, std::chrono::seconds(10));
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
  ASSERT_EQ(r.events.size(), 1u) << "a bad execute section is refused at reload";
  EXPECT_EQ(r.events[0].type, "policy.refused") << "and the refusal logged";
  EXPECT_NE(r.events[0].data["errors"][0]["message"].get<std::string>().find("not-a-cidr"), std::string::npos)
      << r.events[0].data.dump();
  const auto first_mtime = std::filesystem::last_write_time(path);
  std::ofstream(path, std::ios::trunc) << PolicyText(R"(["127.0.0.0/8"])", true);
  // A distinct mtime for the rewrite, even on coarse clocks.
  std::filesystem::last_write_time(path, first_mtime + std::chrono::seconds(1));
  r = stage.Tick({2, ""}, log);
  ASSERT_EQ(r.events.size(), 1u) << "the same file with a valid section is logged";
  EXPECT_EQ(r.events[0].type, "policy.updated");
}

// A refused live edit (issue 31) is in the log as policy.refused, every
// problem placed, and on /healthz beside the policy in force, which stays.
TEST(LivePolicyRefusal, ARefusedEditIsLoggedWithItsErrorsAndShownOnHealthz) {
  TempDir dir;
  PipelineOptions o;
  o.data_dir = dir.sub("data");
  o.durability = Durability::kBuffered;
  o.policy_path = dir.sub("policy.yaml");
  o.http_listen = "127.0.0.1:0";
  std::ofstream(o.policy_path) << "mode: ask\n";
  std::unique_ptr<Pipeline> p;
  ASSERT_TRUE(Pipeline::Start(o, &p).ok());
  httplib::Client http("127.0.0.1", p->api()->port());
  auto health = [&] {
    auto r = http.Get("/healthz");
    return r ? Json::parse(r->body, nullptr, false)["policy"] : Json();
  };
  Json h = health();
  ASSERT_TRUE(h.is_object()) << h.dump();
  ASSERT_TRUE(h["in_force"].is_object()) << h.dump();
  const Json in_force = h["in_force"];
  EXPECT_EQ(h["file"], "in_force") << h.dump();
  EXPECT_FALSE(h.contains("last_refused")) << h.dump();

  // Saved as an editor saves: a bad mode and an unknown key.
  const std::string bad = "mode: sideways\nbogus: 1\n";
  std::ofstream(dir.sub("policy.yaml.new")) << bad;
  std::filesystem::rename(dir.sub("policy.yaml.new"), o.policy_path);
  auto refused = [&] {
    for (uint64_t seq = p->log().head_seq(); seq >= 1; --seq) {
      Event e;
      if (p->log().store().ReadEvent(seq, &e).ok() && e.type == "policy.refused") return std::optional(e);
    }
    return std::optional<Event>();
  };
  testing::WaitUntil([&] { return refused().has_value(); }, std::chrono::seconds(10));
  const std::optional<Event> e = refused();
  ASSERT_TRUE(e) << "the refusal is not in the log";
  EXPECT_EQ(e->org_id, "*");
  EXPECT_EQ(e->data["source"], o.policy_path);
  EXPECT_EQ(e->data["file_sha256"], Sha256Hex(bad));
  EXPECT_EQ(e->data["errors_total"], 2) << e->data.dump();
  ASSERT_EQ(e->data["errors"].size(), 2u) << e->data.dump();
  EXPECT_EQ(e->data["errors"][0]["line"], 1);
  EXPECT_EQ(e->data["errors"][0]["column"], 7);
  EXPECT_NE(e->data["errors"][0]["message"].get<std::string>().find("/mode: must be one of"),
            std::string::npos);
  EXPECT_EQ(e->data["errors"][1], Json({{"line", 2}, {"column", 1}, {"message", "unknown field 'bogus'"}}));
  EXPECT_EQ(e->data["in_force_content_hash"], in_force["content_hash"]);
  EXPECT_EQ(e->data["in_force_version"], in_force["version"]);

  h = health();
  EXPECT_EQ(h["in_force"], in_force) << "the policy in force stays";
  EXPECT_EQ(h["file"], "refused") << h.dump();
  EXPECT_EQ(h["last_refused"]["file_sha256"], Sha256Hex(bad)) << h.dump();
  EXPECT_EQ(h["last_refused"]["errors"][1], "2:1: unknown field 'bogus'") << h.dump();
  testing::ExpectEveryEventConforms(p->log().store());
}

}  // namespace
}  // namespace tollgate
