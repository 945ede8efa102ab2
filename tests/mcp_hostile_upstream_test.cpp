// Upstream MCP servers are hostile input (docs/mcp.md, "Hostile answers"):
// real servers — tests/mcp/hostile_server.py over stdio in the sandbox, and
// a loopback HTTP server here — answer 200,000 levels deep, a depth no
// recursive walk survives, through the execute stage. Each call ends with
// E_UPSTREAM_PROTOCOL as a normal execution.completed, the process serves
// the next call, and a tools/list that deep leaves its server down, saying
// why.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "execute/execute_stage.h"
#include "tests/child_process.h"
#include "tests/execute_flow_util.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

constexpr int kDepth = 200'000;
const std::string kDeep = std::string(kDepth, '[') + std::string(kDepth, ']');
const std::string kScriptDir = TOLLGATE_SOURCE_DIR "/tests/mcp";

bool WaitFor(const std::function<bool()>& ok, std::chrono::seconds limit = std::chrono::seconds(20)) {
  return tollgate::testing::WaitUntil(ok, limit);
}

std::string Str(const Json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// An execute stage over a memory log whose policy declares `servers`.
class HostileUpstreamTest : public ::testing::Test {
 protected:
  void Start(std::vector<McpServerSpec> servers, bool allow_loopback = false) {
    chmod(dir_.path().c_str(), 0755);  // the sandbox's user reads below it when root
    auto p = std::make_shared<ExecutePolicy>(DefaultExecutePolicy(dir_.path()));
    p->mcp_servers = std::move(servers);
    if (allow_loopback) {
      Cidr c;
      ASSERT_TRUE(ParseCidr("127.0.0.0/8", &c));
      p->allow_cidrs = {c};
    }
    ExecuteConfig c;
    c.topics = topics_;
    c.policy = p;
    stage_ = std::make_unique<ExecuteStage>(c);
    ASSERT_TRUE(upstreams().WaitSettled(std::chrono::seconds(20)));
  }
  const McpUpstreams& upstreams() { return *stage_->registry().upstreams(); }
  Json StateOf(const std::string& server) { return upstreams().Describe()[server]; }
  // One allowed call through the stage, run to its end: the ToolResult its
  // execution.completed records (the agent's result is checked to match;
  // *result_value: that result's bytes).
  Json Call(const std::string& tool, std::string* result_value = nullptr) {
    const std::string rid = "r" + std::to_string(++calls_);
    StageResult r = stage_->Process(testing::LogAllowed(&log_, topics_, rid, tool, Json::object()),
                                    {1'790'000'000'000'000, "t/execute/0/" + std::to_string(calls_)}, log_);
    EXPECT_EQ(r.events.size(), 1u);
    if (!r.deferred) return Json();
    log_.Append(r.events);
    StageResult done = r.deferred();
    log_.Append(done.events);
    EXPECT_EQ(done.events.size(), 1u);
    EXPECT_EQ(done.outputs.size(), 1u);
    if (done.events.size() != 1 || done.outputs.size() != 1) return Json();
    EXPECT_EQ(done.events[0].type, "execution.completed");
    if (result_value != nullptr) *result_value = done.outputs[0].message.value;
    Json result = Json::parse(done.outputs[0].message.value);
    EXPECT_EQ(result["result"], done.events[0].data["result"]) << "the agent gets what the log records";
    return done.events[0].data["result"];
  }
  // A stdio server running tests/mcp/hostile_server.py MODE.
  static McpServerSpec Script(const std::string& name, const std::string& mode) {
    McpServerSpec s;
    s.name = name;
    s.command = {"/usr/bin/python3", kScriptDir + "/hostile_server.py", mode};
    s.read_only = {kScriptDir};
    return s;
  }
  int Starts(const std::string& server) {
    std::ifstream in(dir_.path() + "/mcp/" + server + "/starts.log");
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  testing::TempDir dir_;
  Topics topics_;
  testing::MemoryLog log_;
  std::unique_ptr<ExecuteStage> stage_;
  int calls_ = 0;
};

TEST_F(HostileUpstreamTest, AStdioAnswerNestedTooDeepEndsThatCallWithAProtocolErrorAndTheServerIsRestarted) {
  Start({Script("hostile", "call")});
  ASSERT_EQ(StateOf("hostile")["state"], "ready") << StateOf("hostile").dump();
  ASSERT_EQ(Starts("hostile"), 1);

  Json r = Call("mcp:hostile/deep");
  EXPECT_EQ(r["success"], false);
  EXPECT_EQ(r["error"]["code"], "E_UPSTREAM_PROTOCOL") << r.dump();
  EXPECT_EQ(r["error"]["recoverable"], false);
  EXPECT_NE(Str(r["error"]["message"]).find("E_JSON_TOO_DEEP"), std::string::npos) << r.dump();

  // Its stream cannot be trusted past that line: a new process serves on.
  ASSERT_TRUE(WaitFor([&] { return Starts("hostile") == 2 && StateOf("hostile")["state"] == "ready"; }))
      << StateOf("hostile").dump();
  Json ok = Call("mcp:hostile/ok");
  EXPECT_EQ(ok["success"], true) << ok.dump();
  EXPECT_EQ(ok["data"]["content"][0]["text"], "fine");
}

// 63 levels: the agent's result wraps the answer one level deeper, and
// results are read under the input limit (64).
TEST_F(HostileUpstreamTest, AnAnswerAtTheDepthLimitIsServedWholeAndOneLevelDeeperIsRefused) {
  Start({Script("hostile", "call")});
  std::string value;
  Json r = Call("mcp:hostile/edge", &value);
  ASSERT_EQ(r["success"], true) << r.dump().substr(0, 500);
  Json v = r["data"]["structuredContent"]["v"];
  int arrays = 0;
  for (; v.is_array(); v = v.empty() ? Json() : Json(v[0])) ++arrays;
  EXPECT_EQ(arrays, 60) << "as deep as the server sent it";
  Json read;
  EXPECT_TRUE(ParseInputJson(value, &read).ok()) << "the agent's result is within the input limits";
  EXPECT_EQ(Starts("hostile"), 1) << "nothing was refused";
  EXPECT_EQ(Call("mcp:hostile/over")["error"]["code"], "E_UPSTREAM_PROTOCOL");
}

TEST_F(HostileUpstreamTest, AStdioToolListNestedTooDeepIsRefusedAndTheServerIsDownSayingWhy) {
  Start({Script("lister", "list"), Script("fine", "call")});
  const Json s = StateOf("lister");
  EXPECT_NE(s["state"], "ready") << s.dump();
  EXPECT_EQ(s["tools"], Json::array()) << "nothing of that list is taken";
  EXPECT_NE(Str(s["error"]).find("E_JSON_TOO_DEEP"), std::string::npos) << s.dump();
  Json r = Call("mcp:lister/deep");
  EXPECT_EQ(r["error"]["code"], "E_UPSTREAM_UNAVAILABLE") << r.dump();
  EXPECT_NE(Str(r["error"]["message"]).find("refuses"), std::string::npos) << r.dump();
  // The other server was never in question.
  EXPECT_EQ(Call("mcp:fine/ok")["success"], true);
}

// A Streamable HTTP MCP server on loopback: `/mcp` answers tools/call of
// `deep` with a JSON body and `deep_sse` with an event stream 200,000
// levels deep, anything else with "fine"; `/list-deep` lists a schema
// that deep.
class HostileHttpServer {
 public:
  HostileHttpServer() {
    server_.Post("/mcp", [](const httplib::Request& q, httplib::Response& a) { Answer(q, a, false); });
    server_.Post("/list-deep", [](const httplib::Request& q, httplib::Response& a) { Answer(q, a, true); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    tollgate::testing::WaitUntil([this] { return port_ <= 0 || server_.is_running(); },
                                 std::chrono::seconds(1));
  }
  ~HostileHttpServer() {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  static void Answer(const httplib::Request& q, httplib::Response& a, bool list_deep) {
    const Json m = Json::parse(q.body);  // tollgate's own request
    if (!m.contains("id")) {
      a.status = 202;  // a notification
      return;
    }
    const std::string id = m["id"].dump(), method = m.value("method", "");
    const std::string head = R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":)";
    if (method == "initialize") {
      a.set_header("Mcp-Session-Id", "s-1");
      return a.set_content(head + R"({"protocolVersion":"2025-06-18","capabilities":{"tools":{}},)"
                                  R"("serverInfo":{"name":"h","version":"1"}}})",
                           "application/json");
    }
    if (method == "tools/list") {
      const std::string schema =
          list_deep ? R"({"type":"object","default":)" + kDeep + "}" : R"({"type":"object"})";
      return a.set_content(head + R"({"tools":[{"name":"deep","inputSchema":)" + schema + "}]}}",
                           "application/json");
    }
    const std::string tool = m["params"].value("name", "");
    if (tool == "deep") {
      return a.set_content(head + R"({"content":[],"structuredContent":{"v":)" + kDeep + "}}}",
                           "application/json");
    }
    if (tool == "deep_sse") {
      return a.set_content(
          "event: message\ndata: " + head + R"({"content":[],"structuredContent":{"v":)" + kDeep + "}}}\n\n",
          "text/event-stream");
    }
    a.set_content(head + R"({"content":[{"type":"text","text":"fine"}]}})", "application/json");
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

McpServerSpec Remote(const std::string& name, const std::string& url) {
  McpServerSpec s;
  s.name = name;
  s.url = url;
  return s;
}

TEST_F(HostileUpstreamTest,
       AnHttpAnswerNestedTooDeepAsJsonOrAsAnEventStreamEndsThatCallAndTheServerServesOn) {
  HostileHttpServer http;
  Start({Remote("remote", http.Url("/mcp"))}, /*allow_loopback=*/true);
  ASSERT_EQ(StateOf("remote")["state"], "ready") << StateOf("remote").dump();
  for (const char* tool : {"mcp:remote/deep", "mcp:remote/deep_sse"}) {
    Json r = Call(tool);
    EXPECT_EQ(r["error"]["code"], "E_UPSTREAM_PROTOCOL") << tool << ": " << r.dump();
    EXPECT_NE(Str(r["error"]["message"]).find("E_JSON_TOO_DEEP"), std::string::npos) << r.dump();
  }
  EXPECT_EQ(StateOf("remote")["state"], "ready") << "one refused body leaves the session as it was";
  Json ok = Call("mcp:remote/ok");
  EXPECT_EQ(ok["success"], true) << ok.dump();
  EXPECT_EQ(ok["data"]["content"][0]["text"], "fine");
}

TEST_F(HostileUpstreamTest, AnHttpToolListNestedTooDeepIsRefusedAndTheServerIsDownSayingWhy) {
  HostileHttpServer http;
  Start({Remote("lister", http.Url("/list-deep"))}, /*allow_loopback=*/true);
  const Json s = StateOf("lister");
  EXPECT_EQ(s["state"], "down") << s.dump();
  EXPECT_EQ(s["tools"], Json::array());
  EXPECT_NE(Str(s["error"]).find("E_JSON_TOO_DEEP"), std::string::npos) << s.dump();
  Json r = Call("mcp:lister/deep");
  EXPECT_EQ(r["error"]["code"], "E_UPSTREAM_UNAVAILABLE") << r.dump();
}

}  // namespace
}  // namespace tollgate
