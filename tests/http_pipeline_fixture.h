// The fixture of the http pipeline tests (url_pipeline_test,
// http_alias_test): one policy read by the real policy engine and the real
// execute stage, a log in memory, and loopback servers that record what
// they received. Traffic only goes to 127.0.0.1.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "core/invocation.h"
#include "core/sha256.h"
#include "decide/policy_engine.h"
#include "execute/execute_stage.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

namespace tollgate {
namespace testing {

// A server on 127.0.0.1 that records the raw request target and headers.
class RecordingServer {
 public:
  RecordingServer() {
    auto h = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        targets_.push_back(req.target);
        methods_.push_back(req.method);
        headers_.push_back(req.headers);
        bodies_.push_back(req.body);
      }
      if (handler) return handler(req, res);
      res.set_content("ok", "text/plain");
    };
    server_.Get(".*", h);
    server_.Post(".*", h);
    server_.Put(".*", h);
    server_.Delete(".*", h);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    tollgate::testing::WaitUntil([this] { return server_.is_running(); }, std::chrono::seconds(1));
  }
  ~RecordingServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> targets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return targets_;
  }
  std::vector<std::string> methods() const {
    std::lock_guard<std::mutex> lock(mu_);
    return methods_;
  }
  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  httplib::Headers last_headers() const {
    std::lock_guard<std::mutex> lock(mu_);
    return headers_.empty() ? httplib::Headers() : headers_.back();
  }
  std::function<void(const httplib::Request&, httplib::Response&)> handler;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> targets_;
  std::vector<std::string> methods_;
  std::vector<httplib::Headers> headers_;
  std::vector<std::string> bodies_;
};

constexpr int64_t kT0 = 1'795'000'000'000'000;

// The policy for one test: one YAML document read by decide and execute.
class HttpPipelineTest : public ::testing::Test {
 protected:
  void Load(const std::string& yaml) {
    PolicyPtr p;
    Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
    ASSERT_TRUE(s.ok()) << s.ToString();
    pif_.SetFile(p);
    LoadExecute(p->doc());
  }
  // Execute's view of the policy only (as when the two stages disagree).
  void LoadExecute(const Json& doc) {
    auto ep = std::make_shared<ExecutePolicy>();
    Status s = ExecutePolicyFromJson(doc, dir_.path(), ep.get());
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExecuteConfig c;
    c.topics = topics_;
    c.policy = ep;
    stage_ = std::make_unique<ExecuteStage>(c);
  }
  Json Decide(const std::string& agent, const std::string& rid, const Json& args) {
    Json req = Request(agent, rid, args);
    return tollgate::Decide(pif_, BudgetLedger(), DecideInput{&req, kT0});
  }
  Json Request(const std::string& agent, const std::string& rid, const Json& args) const {
    return {{"request_id", rid},  {"org_id", org_}, {"agent_id", agent},
            {"session_id", "s1"}, {"tool", tool_},  {"args", args}};
  }
  // Logs request.received and `decision` as decision.made, sends the flow
  // to execute and runs what it defers: the execution.completed result.
  Json Execute(const std::string& agent, const std::string& rid, const Json& args, const Json& decision,
               bool* started = nullptr) {
    Flow f;
    f.request = Request(agent, rid, args);
    f.received_at = FormatTime(kT0);
    f.args_hash = ArgsHash(args);
    f.decision = decision;
    std::string canon;
    EXPECT_TRUE(CanonicalBytes(f.request, &canon).ok());
    log_.Append({FlowEvent(f, "request.received", kT0,
                           {{"request", f.request},
                            {"received_at", f.received_at},
                            {"args_hash", f.args_hash},
                            {"content_hash", Sha256Hex(canon)},
                            {"source", "test"},
                            {"redacted", Json::array()}}),
                 FlowEvent(f, "decision.made", kT0 + 1, decision)});
    StageResult r = stage_->Process(MessageFor(topics_.execute(), f.request, f.ToJson()),
                                    {kT0 + 2, "inc/tollgate.execute/0/" + std::to_string(++offset_)}, log_);
    log_.Append(r.events);
    if (started != nullptr) *started = false;
    for (const auto& e : r.events) {
      if (e.type == "execution.started" && started != nullptr) *started = true;
    }
    if (r.deferred) {
      StageResult done = r.deferred();
      log_.Append(done.events);
      r.events = done.events;
    }
    for (const auto& e : r.events) {
      if (e.type == "execution.completed") return e.data["result"];
    }
    ADD_FAILURE() << "no execution.completed for " << rid;
    return Json();
  }
  static std::string Code(const Json& result) {
    return result.contains("error") && result["error"].is_object() ? result["error"].value("code", "") : "";
  }

  std::string tool_ = "http_request";  // the tool Decide and Execute call
  std::string org_ = "o1";             // the org they call as (Yaml() puts its agents in o1)
  testing::TempDir dir_;
  Topics topics_;
  PolicyInForce pif_;
  std::unique_ptr<ExecuteStage> stage_;
  testing::MemoryLog log_;
  int offset_ = 0;
};

// `agent_section` (entries indented by 2, as under a top-level `agents:`)
// as org o1's agents, the org of every request here.
inline std::string Yaml(const RecordingServer& s, const std::string& agent_section) {
  std::string agents;
  size_t at = 0;
  while (at < agent_section.size()) {
    const size_t nl = agent_section.find('\n', at);
    const size_t end = nl == std::string::npos ? agent_section.size() : nl + 1;
    agents += "    " + agent_section.substr(at, end - at);
    at = end;
  }
  return "mode: ask\n"
         "execute:\n  network:\n    allow_cidrs: [127.0.0.0/8]\n"
         "orgs:\n  o1:\n    agents:\n" +
         agents;
}

}  // namespace testing
}  // namespace tollgate
