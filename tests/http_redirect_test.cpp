// http_request's redirects across origins (docs/tools.md, issue 28), against
// real loopback servers: two ports of 127.0.0.1 are two origins.
// - a hop to another origin keeps only Accept, Accept-Language,
//   Accept-Encoding and User-Agent: credentials under any name
//   (Ocp-Apim-Subscription-Key, X-Functions-Key, a custom header) stay
//   behind, also on the hops after it;
// - a hop to another origin that would re-send the method and body (307,
//   308, 301/302 of a PUT) is refused with E_CROSS_ORIGIN_REDIRECT, and the
//   other origin gets nothing; 303 and 301/302 of a POST become a GET
//   without the body and are followed;
// - the same origin keeps method, body and headers on 307 and 308.
#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <thread>

#include "tests/child_process.h"
#include "tests/execute_test_util.h"

namespace tollgate {
namespace {

using testing::ToolFixture;

// A server on 127.0.0.1 that records every request it gets.
class Origin {
 public:
  struct Seen {
    std::string method, path, body;
    httplib::Headers headers;
  };
  Origin() {
    auto h = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back({req.method, req.path, req.body, req.headers});
      }
      if (handler) return handler(req, res);
      res.set_content(req.method + " " + req.path + " " + req.body, "text/plain");
    };
    server_.Get(".*", h);
    server_.Post(".*", h);
    server_.Put(".*", h);
    server_.Delete(".*", h);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    tollgate::testing::WaitUntil([this] { return server_.is_running(); }, std::chrono::seconds(1));
  }
  ~Origin() {
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  std::function<void(const httplib::Request&, httplib::Response&)> handler;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
};

class RedirectTest : public ::testing::Test, public ToolFixture {
 protected:
  void SetUp() override {
    Cidr lo;
    ASSERT_TRUE(ParseCidr("127.0.0.0/8", &lo));
    policy().allow_cidrs = {lo};
    policy().orgs["o1"]["agents"]["a1"]["http_request"] = {
        {"allowed_methods", {"GET", "POST", "PUT", "DELETE"}},
        {"default_headers", {{"Ocp-Apim-Subscription-Key", "apim-0123"}}}};
  }
};

TEST_F(RedirectTest, AHopToAnotherOriginKeepsOnlyTheAllowlistedHeaders) {
  Origin a, b;
  a.handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/away") return res.set_redirect(b.url("/bounce"));
    res.set_content("home", "text/plain");
  };
  b.handler = [&](const httplib::Request&, httplib::Response& res) { res.set_redirect(a.url("/home")); };
  const Json headers = {{"Authorization", "Bearer tok-1"},
                        {"X-Functions-Key", "fk-1"},
                        {"Cookie", "sid=1"},
                        {"X-Custom-Credential", "c-1"},
                        {"X-Trace", "t-1"},
                        {"Accept", "text/plain"},
                        {"Accept-Language", "de"},
                        {"Accept-Encoding", "identity"},
                        {"User-Agent", "agent/1"}};
  Json r = Call("http_request", {{"url", a.url("/away")}, {"headers", headers}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["body"], "home");
  ASSERT_EQ(b.seen().size(), 1u);
  const auto crossed = b.seen()[0].headers;  // a copy: seen() returns a temporary
  for (const char* k : {"Authorization", "X-Functions-Key", "Ocp-Apim-Subscription-Key", "Cookie",
                        "X-Custom-Credential", "X-Trace"}) {
    EXPECT_EQ(crossed.count(k), 0u) << k << " crossed to another origin";
  }
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"Accept", "text/plain"},
                             {"Accept-Language", "de"},
                             {"Accept-Encoding", "identity"},
                             {"User-Agent", "agent/1"}}) {
    auto it = crossed.find(k);
    ASSERT_NE(it, crossed.end()) << k << " is allowlisted";
    EXPECT_EQ(it->second, v);
  }
  // Back on the first origin: what was dropped stays dropped.
  ASSERT_EQ(a.seen().size(), 2u);
  EXPECT_EQ(a.seen()[0].headers.count("Authorization"), 1u) << "the first hop had it";
  EXPECT_EQ(a.seen()[0].headers.count("Ocp-Apim-Subscription-Key"), 1u);
  EXPECT_EQ(a.seen()[1].headers.count("Authorization"), 0u);
  EXPECT_EQ(a.seen()[1].headers.count("Ocp-Apim-Subscription-Key"), 0u);
}

TEST_F(RedirectTest, AHopToAnotherOriginThatWouldResendTheBodyIsRefused) {
  Origin a, b;
  a.handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/307") return res.set_redirect(b.url("/landed"), 307);
    if (req.path == "/308") return res.set_redirect(b.url("/landed"), 308);
    if (req.path == "/301") return res.set_redirect(b.url("/landed"), 301);
  };
  struct Case {
    std::string method, path, body;
    int status;
  };
  for (const Case& c : {Case{"POST", "/307", "secret body", 307}, Case{"POST", "/308", "secret body", 308},
                        Case{"PUT", "/301", "secret body", 301}, Case{"POST", "/307", "", 307},
                        Case{"DELETE", "/308", "", 308}}) {
    Json args = {{"url", a.url(c.path)}, {"method", c.method}};
    if (!c.body.empty()) args["body"] = c.body;
    Json r = Call("http_request", args);
    EXPECT_EQ(Code(r), "E_CROSS_ORIGIN_REDIRECT") << c.method << " " << c.path << ": " << r.dump();
    EXPECT_EQ(r["data"]["status"], c.status);
    EXPECT_EQ(r["data"]["location"], b.url("/landed"));
    EXPECT_EQ(r["data"]["url"], a.url(c.path));
  }
  EXPECT_EQ(a.seen().size(), 5u);
  EXPECT_TRUE(b.seen().empty()) << "the other origin got nothing: not the body, not the request without it";
}

TEST_F(RedirectTest, ACrossOriginHopThatDropsTheBodyAnywayIsFollowedAsAGet) {
  Origin a, b;
  a.handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/303") return res.set_redirect(b.url("/landed"), 303);
    if (req.path == "/302") return res.set_redirect(b.url("/landed"), 302);
    if (req.path == "/get307") return res.set_redirect(b.url("/landed"), 307);
  };
  for (const auto& [method, path] :
       {std::pair<std::string, std::string>{"POST", "/303"}, {"POST", "/302"}, {"GET", "/get307"}}) {
    Json args = {{"url", a.url(path)}, {"method", method}};
    if (method == "POST") args["json"] = {{"secret", "body"}};
    Json r = Call("http_request", args);
    ASSERT_TRUE(r["success"]) << path << ": " << r.dump();
    const auto got = b.seen().back();
    EXPECT_EQ(got.method, "GET") << path;
    EXPECT_EQ(got.body, "") << path;
    EXPECT_EQ(got.headers.count("Content-Type"), 0u) << path;
  }
  EXPECT_EQ(b.seen().size(), 3u);
}

TEST_F(RedirectTest, TheSameOriginKeepsMethodBodyAndHeadersOn307And308) {
  Origin a;
  a.handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/307") return res.set_redirect("/landed", 307);
    if (req.path == "/308") return res.set_redirect(a.url("/landed"), 308);
    res.set_content(req.method + " " + req.body, "text/plain");
  };
  for (const char* path : {"/307", "/308"}) {
    Json r = Call("http_request", {{"url", a.url(path)},
                                   {"method", "POST"},
                                   {"body", "the body"},
                                   {"headers", {{"X-Functions-Key", "fk-1"}}}});
    ASSERT_TRUE(r["success"]) << path << ": " << r.dump();
    EXPECT_EQ(r["data"]["body"], "POST the body") << path;
    const auto last = a.seen().back();
    EXPECT_EQ(last.path, "/landed");
    EXPECT_EQ(last.headers.count("X-Functions-Key"), 1u) << path;
    EXPECT_EQ(last.headers.count("Ocp-Apim-Subscription-Key"), 1u) << path;
  }
}

}  // namespace
}  // namespace tollgate
