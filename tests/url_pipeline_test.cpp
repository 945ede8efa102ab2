// What executes is what was decided (issue 15): decide and execute compose
// and normalise URLs with one function (core/url.h), decide matches its
// rules against that normalised URL, and execute fetches exactly it, or
// refuses with E_DECISION_MISMATCH when the call it would run is not the
// decision's. End to end: the real policy engine decides, the real execute
// stage runs http_request against local loopback servers that record the
// request target they received. Traffic only goes to 127.0.0.1.
#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "core/invocation.h"
#include "core/sha256.h"
#include "decide/policy_engine.h"
#include "execute/execute_stage.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

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
      }
      if (handler) return handler(req, res);
      res.set_content("ok", "text/plain");
    };
    server_.Get(".*", h);
    server_.Post(".*", h);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
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
};

constexpr int64_t kT0 = 1'795'000'000'000'000;

// The policy for one test: one YAML document read by decide and execute.
class UrlPipelineTest : public ::testing::Test {
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
  static Json Request(const std::string& agent, const std::string& rid, const Json& args) {
    return {{"request_id", rid}, {"org_id", "o1"}, {"agent_id", agent}, {"session_id", "s1"}, {"tool", "http_request"},
            {"args", args}};
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
                           {{"request", f.request}, {"received_at", f.received_at}, {"args_hash", f.args_hash},
                            {"content_hash", Sha256Hex(canon)}, {"source", "test"}, {"redacted", Json::array()}}),
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

  testing::TempDir dir_;
  Topics topics_;
  PolicyInForce pif_;
  std::unique_ptr<ExecuteStage> stage_;
  testing::MemoryLog log_;
  int offset_ = 0;
};

std::string Yaml(const RecordingServer& s, const std::string& agent_section) {
  return "mode: ask\n"
         "execute:\n  network:\n    allow_cidrs: [127.0.0.0/8]\n"
         "agents:\n" +
         agent_section;
}

TEST_F(UrlPipelineTest, RelativeAndTrickyUrlsFetchExactlyTheDecidedInvocation) {
  RecordingServer s, other;
  const std::string base = s.origin() + "/api/";
  Load(Yaml(s, "  a1:\n    mode: dangerous\n    deny: [\"http_request:GET " + s.origin() +
                   "/api/admin*\"]\n    http_request: {base_url: \"" + base + "\"}\n"));
  const std::string P = std::to_string(s.port());
  struct Case {
    std::string url;
    std::string want;  // the decided and fetched URL; "deny" when the deny must hold
  };
  const std::vector<Case> cases = {
      {"./x", s.origin() + "/api/x"},
      {"../x", s.origin() + "/x"},
      {"/x", s.origin() + "/x"},
      {"%2e%2e/x", s.origin() + "/x"},
      {"%2E%2e/%2e/y", s.origin() + "/y"},
      {"x?y=/admin", s.origin() + "/api/x?y=/admin"},
      {"a%2fadmin", s.origin() + "/api/a%2Fadmin"},
      {"a%2Fb/../c", s.origin() + "/api/c"},
      {"x#frag", s.origin() + "/api/x"},
      {"%7Euser", s.origin() + "/api/~user"},
      {"/api//../api/admin", s.origin() + "/api/api/admin"},  // ".." pops the empty segment (RFC 3986)
      {"HTTP://0X7F000001:" + P + "/Mixed", s.origin() + "/Mixed"},
      {"http://127.0.0.1:0" + P + "/lead", s.origin() + "/lead"},
      {"//127.0.0.1:" + std::to_string(other.port()) + "/x", other.origin() + "/x"},
      // The deny on the normalised path holds, however the path is spelt.
      {"./admin/x", "deny"},
      {"admin", "deny"},
      {"%61dmin/x", "deny"},
      {"x/../admin/y", "deny"},
      {"%2e/admin", "deny"},
      {"./x/%2E%2E/admin", "deny"},
      {"/api/x/../admin", "deny"},
      {"//127.0.0.1:" + P + "/api/admin", "deny"},
      {"HTTP://127.0.0.1:" + P + "/api/./admin", "deny"},
  };
  int n = 0, expected_hits_s = 0, expected_hits_other = 0;
  for (const auto& c : cases) {
    const std::string rid = "u" + std::to_string(++n);
    Json d = Decide("a1", rid, {{"url", c.url}});
    if (c.want == "deny") {
      EXPECT_EQ(d["verdict"], "deny") << c.url << " -> " << d["invocation"];
      EXPECT_EQ(d["error_code"], "E_POLICY_DENIED") << c.url;
      continue;
    }
    ASSERT_EQ(d["verdict"], "allow") << c.url << " " << d.dump();
    EXPECT_EQ(d["invocation"], "http_request:GET " + c.want) << c.url;
    Json r = Execute("a1", rid, {{"url", c.url}}, d);
    ASSERT_TRUE(r.value("success", false)) << c.url << " " << r.dump();
    RecordingServer& hit = c.want.rfind(other.origin(), 0) == 0 ? other : s;
    (&hit == &s ? expected_hits_s : expected_hits_other)++;
    ASSERT_EQ(hit.targets().size(), static_cast<size_t>(&hit == &s ? expected_hits_s : expected_hits_other)) << c.url;
    // The request line the server received is the decision's invocation.
    EXPECT_EQ("http_request:GET " + hit.origin() + hit.targets().back(), d["invocation"].get<std::string>()) << c.url;
    EXPECT_EQ(r["data"]["url"], c.want) << c.url;
  }
  EXPECT_EQ(s.targets().size(), static_cast<size_t>(expected_hits_s)) << "denied calls reached nothing";
}

// The seeds' default_method: a call that names no method is decided, and
// sent, as that method (a POST is then mutating: it asks, and is never run
// again after a crash).
TEST_F(UrlPipelineTest, ACallWithNoMethodUsesTheAgentsDefaultMethodWhenDecidedAndWhenSent) {
  RecordingServer s;
  Load(Yaml(s, "  a1:\n    mode: dangerous\n    http_request: {base_url: \"" + s.origin() +
                   "/api/\", default_method: post, allowed_methods: [GET, POST]}\n"));
  Json d = Decide("a1", "r-post", {{"url", "tickets"}});
  EXPECT_EQ(d["invocation"], "http_request:POST " + s.origin() + "/api/tickets") << d.dump();
  EXPECT_EQ(d["read_only"], false);
  Json r = Execute("a1", "r-post", {{"url", "tickets"}}, d);
  EXPECT_TRUE(r.value("success", false)) << r.dump();
  EXPECT_EQ(s.methods(), std::vector<std::string>{"POST"});
  // Naming a method still wins.
  Json g = Decide("a1", "r-get", {{"url", "tickets"}, {"method", "GET"}});
  EXPECT_EQ(g["invocation"], "http_request:GET " + s.origin() + "/api/tickets");
}

TEST_F(UrlPipelineTest, HostsAndDefaultPortsAreNormalisedBeforeMatching) {
  RecordingServer s;
  Load(Yaml(s, "  a1:\n    mode: restrict\n    allow: [\"http_request:GET http://example.com/ok*\"]\n"
               "    deny: [\"http_request:GET http://localhost/*\"]\n"));
  EXPECT_EQ(Decide("a1", "h1", {{"url", "HTTP://Example.COM:80/ok"}})["invocation"],
            "http_request:GET http://example.com/ok");
  EXPECT_EQ(Decide("a1", "h1", {{"url", "HTTP://Example.COM:80/ok"}})["verdict"], "allow");
  EXPECT_EQ(Decide("a1", "h2", {{"url", "https://example.com:443/ok"}})["invocation"],
            "http_request:GET https://example.com/ok");
  EXPECT_EQ(Decide("a1", "h3", {{"url", "http://LocalHost:80/x"}})["rule"], "agent.deny:http_request:GET http://localhost/*");
  EXPECT_EQ(Decide("a1", "h4", {{"url", "http://user:pw@example.com/ok"}})["verdict"], "deny")
      << "userinfo is refused, not matched around";
}

// Restrict mode under an allow on …/v1/*: a network-path reference to
// another port and a ../ out of v1 were allowed by the string join and
// fetched elsewhere. Both are denied now; the real v1 call runs.
TEST_F(UrlPipelineTest, RestrictModeCannotBeLeftByRelativeReferences) {
  RecordingServer s, other;
  Load(Yaml(s, "  r1:\n    mode: restrict\n    allow: [\"http_request:GET " + s.origin() +
                   "/api/v1/*\"]\n    http_request: {base_url: \"" + s.origin() + "/api/v1/\"}\n"));
  for (const std::string& url : {"//127.0.0.1:" + std::to_string(other.port()) + "/x", std::string("../admin/secret"),
                                std::string("%2e%2e/admin/secret"), std::string("/api/admin/secret")}) {
    Json d = Decide("r1", "d", {{"url", url}});
    EXPECT_EQ(d["verdict"], "deny") << url << " decided as " << d["invocation"];
  }
  Json d = Decide("r1", "ok", {{"url", "items"}});
  ASSERT_EQ(d["verdict"], "allow") << d.dump();
  EXPECT_TRUE(Execute("r1", "ok", {{"url", "items"}}, d).value("success", false));
  EXPECT_EQ(s.targets(), std::vector<std::string>{"/api/v1/items"});
  EXPECT_TRUE(other.targets().empty());
}

// A decision whose invocation is not what the args compose to (a forged or
// stale decision.made, or execute reading another base_url than decide
// did) is refused with E_DECISION_MISMATCH, logged, and nothing runs.
TEST_F(UrlPipelineTest, ACallThatIsNotItsDecisionIsRefusedAndNothingRuns) {
  RecordingServer s;
  const std::string section = "  a1:\n    mode: dangerous\n    http_request: {base_url: \"" + s.origin() + "/api/\"}\n";
  Load(Yaml(s, section));
  // A decision for another URL than the args name.
  Json d = Decide("a1", "m1", {{"url", "public"}});
  ASSERT_EQ(d["verdict"], "allow");
  bool started = true;
  Json r = Execute("a1", "m1", {{"url", "admin/x"}}, d, &started);
  EXPECT_EQ(Code(r), "E_DECISION_MISMATCH") << r.dump();
  EXPECT_FALSE(started) << "refused before execution.started";
  int completed = 0;
  for (const auto& e : log_.events_) {
    if (e.request_id == "m1" && e.type == "execution.completed") {
      ++completed;
      EXPECT_EQ(e.data["result"]["error"]["code"], "E_DECISION_MISMATCH");
    }
  }
  EXPECT_EQ(completed, 1) << "the refusal is in the log";
  // Execute's policy moved base_url after decide decided.
  Json d2 = Decide("a1", "m2", {{"url", "items"}});
  Json moved = pif_.file()->doc();
  moved["agents"]["a1"]["http_request"]["base_url"] = s.origin() + "/elsewhere/";
  LoadExecute(moved);
  EXPECT_EQ(Code(Execute("a1", "m2", {{"url", "items"}}, d2)), "E_DECISION_MISMATCH");
  // A file tool whose path is not the decided subject.
  Json wd = d;
  wd["invocation"] = "builtin:write_file";
  wd["subject"] = "write_file:allowed.txt";
  Json wr = Execute("a1", "m3", {{"path", "other.txt"}, {"content", "x"}}, wd);
  EXPECT_EQ(Code(wr), "E_DECISION_MISMATCH") << wr.dump();
  EXPECT_TRUE(s.targets().empty()) << "nothing was fetched";
}

// A cross-origin redirect drops every header that carries a credential;
// a same-origin one keeps them.
TEST_F(UrlPipelineTest, ACrossOriginRedirectDropsCredentialHeaders) {
  RecordingServer s, other;
  s.handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/away") return res.set_redirect(other.origin() + "/landed");
    if (req.path == "/here") return res.set_redirect("/landed");
    res.set_content("ok", "text/plain");
  };
  Load(Yaml(s, "  a1:\n    mode: dangerous\n"));
  const Json headers{{"Authorization", "Bearer tok-123"}, {"X-Api-Key", "k-123"}, {"Api-Key", "k-456"},
                     {"Cookie", "sid=1"}, {"Proxy-Authorization", "Basic eA=="}, {"X-Auth-Token", "t-1"},
                     {"X-Trace", "keep-me"}};
  Json args{{"url", s.origin() + "/away"}, {"headers", headers}};
  Json r = Execute("a1", "x1", args, Decide("a1", "x1", args));
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  ASSERT_EQ(other.targets().size(), 1u);
  const auto h = other.last_headers();
  for (const char* k : {"Authorization", "X-Api-Key", "Api-Key", "Cookie", "Proxy-Authorization", "X-Auth-Token"}) {
    EXPECT_EQ(h.count(k), 0u) << k << " crossed origins";
  }
  EXPECT_EQ(h.count("X-Trace"), 1u) << "other headers are kept";
  args["url"] = s.origin() + "/here";
  r = Execute("a1", "x2", args, Decide("a1", "x2", args));
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  const auto same = s.last_headers();
  EXPECT_EQ(same.count("X-Api-Key"), 1u) << "same origin: kept";
  EXPECT_EQ(other.targets().size(), 1u);
}

}  // namespace
}  // namespace tollgate
