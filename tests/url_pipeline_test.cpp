// What executes is what was decided (issue 15): decide and execute compose
// and normalise URLs with one function (core/url.h), decide matches its
// rules against that normalised URL, and execute fetches exactly it, or
// refuses with E_DECISION_MISMATCH when the call it would run is not the
// decision's. End to end: the real policy engine decides, the real execute
// stage runs http_request against local loopback servers that record the
// request target they received. Traffic only goes to 127.0.0.1.
#include "tests/http_pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::HttpPipelineTest;
using testing::RecordingServer;
using testing::Yaml;
using UrlPipelineTest = HttpPipelineTest;

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
    ASSERT_EQ(hit.targets().size(), static_cast<size_t>(&hit == &s ? expected_hits_s : expected_hits_other))
        << c.url;
    // The request line the server received is the decision's invocation.
    EXPECT_EQ("http_request:GET " + hit.origin() + hit.targets().back(), d["invocation"].get<std::string>())
        << c.url;
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
  Load(Yaml(s,
            "  a1:\n    mode: restrict\n    allow: [\"http_request:GET http://example.com/ok*\"]\n"
            "    deny: [\"http_request:GET http://localhost/*\"]\n"));
  EXPECT_EQ(Decide("a1", "h1", {{"url", "HTTP://Example.COM:80/ok"}})["invocation"],
            "http_request:GET http://example.com/ok");
  EXPECT_EQ(Decide("a1", "h1", {{"url", "HTTP://Example.COM:80/ok"}})["verdict"], "allow");
  EXPECT_EQ(Decide("a1", "h2", {{"url", "https://example.com:443/ok"}})["invocation"],
            "http_request:GET https://example.com/ok");
  EXPECT_EQ(Decide("a1", "h3", {{"url", "http://LocalHost:80/x"}})["rule"],
            "agent.deny:http_request:GET http://localhost/*");
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
  for (const std::string& url :
       {"//127.0.0.1:" + std::to_string(other.port()) + "/x", std::string("../admin/secret"),
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
  const std::string section =
      "  a1:\n    mode: dangerous\n    http_request: {base_url: \"" + s.origin() + "/api/\"}\n";
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
  moved["orgs"]["o1"]["agents"]["a1"]["http_request"]["base_url"] = s.origin() + "/elsewhere/";
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

// A cross-origin redirect keeps only the allowlisted headers (Accept, ...);
// a same-origin one keeps them all.
TEST_F(UrlPipelineTest, ACrossOriginRedirectDropsCredentialHeaders) {
  RecordingServer s, other;
  s.handler = [&](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/away") return res.set_redirect(other.origin() + "/landed");
    if (req.path == "/here") return res.set_redirect("/landed");
    res.set_content("ok", "text/plain");
  };
  Load(Yaml(s, "  a1:\n    mode: dangerous\n"));
  const Json headers{{"Authorization", "Bearer tok-123"},
                     {"X-Api-Key", "k-123"},
                     {"Api-Key", "k-456"},
                     {"Cookie", "sid=1"},
                     {"Proxy-Authorization", "Basic eA=="},
                     {"X-Auth-Token", "t-1"},
                     {"X-Trace", "t-2"},
                     {"Accept", "text/plain"}};
  Json args{{"url", s.origin() + "/away"}, {"headers", headers}};
  Json r = Execute("a1", "x1", args, Decide("a1", "x1", args));
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  ASSERT_EQ(other.targets().size(), 1u);
  const auto h = other.last_headers();
  for (const char* k :
       {"Authorization", "X-Api-Key", "Api-Key", "Cookie", "Proxy-Authorization", "X-Auth-Token"}) {
    EXPECT_EQ(h.count(k), 0u) << k << " crossed origins";
  }
  EXPECT_EQ(h.count("X-Trace"), 0u) << "any other header may carry a credential: dropped too";
  EXPECT_EQ(h.count("Accept"), 1u) << "the allowlisted ones are kept";
  args["url"] = s.origin() + "/here";
  r = Execute("a1", "x2", args, Decide("a1", "x2", args));
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  const auto same = s.last_headers();
  EXPECT_EQ(same.count("X-Api-Key"), 1u) << "same origin: kept";
  EXPECT_EQ(other.targets().size(), 1u);
}

}  // namespace
}  // namespace tollgate
