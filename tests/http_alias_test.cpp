// http_request aliases (issue 19, core/http_alias.h): a call the operator
// configured once, offered to an agent as its own tool. The real policy
// engine decides and the real execute stage sends the request to a loopback
// server that records what it received, so each test checks what reached
// the wire against what was decided. Traffic only goes to 127.0.0.1.
#include <cstdlib>

#include "decide/policy_loader.h"
#include "decide/tool_access.h"
#include "deploy/tool_directory.h"
#include "tests/http_pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::HttpPipelineTest;
using testing::RecordingServer;
using testing::Yaml;

// create_ticket: a POST to <base>/projects/{project}/tickets whose other
// arguments are the JSON body, with a token the agent never sees.
std::string TicketAgent(const RecordingServer& s, const std::string& extra = "") {
  return "  support:\n"
         "    mode: ask\n" +
         extra +
         "    http_request:\n"
         "      base_url: \"" +
         s.origin() +
         "/api/\"\n"
         "      aliases:\n"
         "        create_ticket:\n"
         "          description: Open a ticket in the tracker\n"
         "          method: post\n"
         "          url: \"projects/{project}/tickets\"\n"
         "          headers: {Authorization: \"Bearer ${env:TOLLGATE_TEST_TICKET_TOKEN}\"}\n"
         "          input_schema:\n"
         "            type: object\n"
         "            required: [project, title]\n"
         "            additionalProperties: false\n"
         "            properties:\n"
         "              project: {type: string}\n"
         "              title: {type: string, maxLength: 200}\n"
         "              priority: {type: integer, minimum: 1, maximum: 4}\n";
}

class HttpAliasTest : public HttpPipelineTest {
 protected:
  void SetUp() override {
    tool_ = "create_ticket";
    setenv("TOLLGATE_TEST_TICKET_TOKEN", "tok-secret-1", 1);
  }
  static std::vector<std::string> Reasons(const Json& d) {
    return {d.value("reason", ""), d.value("rule", "")};
  }
};

TEST_F(HttpAliasTest, AnAliasIsDecidedAndSentAsTheHttpRequestItExpandsTo) {
  RecordingServer s;
  Json body_seen;
  s.handler = [&](const httplib::Request& req, httplib::Response& res) {
    body_seen = Json::parse(req.body, nullptr, false);
    res.set_content(R"({"id": 42})", "application/json");
  };
  Load(Yaml(s, TicketAgent(s)));
  const Json args{{"project", "ops"}, {"title", "disk full"}, {"priority", 2}};
  Json d = Decide("support", "t1", args);
  // Mutating and not otherwise allowed: approvers see exactly the request.
  EXPECT_EQ(d["verdict"], "ask") << d.dump();
  EXPECT_EQ(d["rule"], "http.mutating");
  EXPECT_EQ(d["invocation"], "http_request:POST " + s.origin() + "/api/projects/ops/tickets");
  EXPECT_EQ(d["read_only"], false);
  // allowed_methods is the default (GET, HEAD): the alias's POST is the
  // operator's own grant. Run it as approvers would have granted it.
  d["verdict"] = "allow";
  Json r = Execute("support", "t1", args, d);
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  EXPECT_EQ(r["data"]["json"]["id"], 42);
  ASSERT_EQ(s.targets(), std::vector<std::string>{"/api/projects/ops/tickets"});
  EXPECT_EQ(s.methods(), std::vector<std::string>{"POST"});
  EXPECT_EQ(body_seen, (Json{{"title", "disk full"}, {"priority", 2}}))
      << "the path's argument is not in the body";
  const auto h = s.last_headers();
  ASSERT_EQ(h.count("Authorization"), 1u);
  EXPECT_EQ(h.find("Authorization")->second, "Bearer tok-secret-1");
  EXPECT_EQ(h.find("Content-Type")->second, "application/json");
  for (const auto& e : log_.events_) {
    EXPECT_EQ(e.data.dump().find("tok-secret-1"), std::string::npos) << e.type << " holds the alias's secret";
  }
}

// A placeholder's value is one path segment, however it is spelt: it cannot
// climb out of the path, add a query or name another host.
TEST_F(HttpAliasTest, APlaceholderIsOneEncodedPathSegment) {
  RecordingServer s;
  Load(Yaml(s, TicketAgent(s, "    rules: [{tools: create_ticket, verdict: allow}]\n")));
  struct Case {
    std::string project, target;
  };
  const std::vector<Case> cases = {
      {"../../admin", "/api/projects/..%2F..%2Fadmin/tickets"},
      {"a/b?x=1#f", "/api/projects/a%2Fb%3Fx%3D1%23f/tickets"},
      {"//evil.example/x", "/api/projects/%2F%2Fevil.example%2Fx/tickets"},
      {"%2e%2e", "/api/projects/%252e%252e/tickets"},
      {"caf\xc3\xa9", "/api/projects/caf%C3%A9/tickets"},
  };
  int n = 0;
  for (const auto& c : cases) {
    const std::string rid = "p" + std::to_string(++n);
    const Json args{{"project", c.project}, {"title", "t"}};
    Json d = Decide("support", rid, args);
    ASSERT_EQ(d["verdict"], "allow") << c.project << " " << d.dump();
    EXPECT_EQ(d["invocation"], "http_request:POST " + s.origin() + c.target) << c.project;
    Json r = Execute("support", rid, args, d);
    ASSERT_TRUE(r.value("success", false)) << c.project << " " << r.dump();
    EXPECT_EQ(s.targets().back(), c.target) << c.project;
  }
}

TEST_F(HttpAliasTest, ArgumentsThatDoNotFitTheAliasAreDeniedAtDecideNamingTheField) {
  RecordingServer s;
  Load(Yaml(s, TicketAgent(s, "    rules: [{tools: create_ticket, verdict: allow}]\n")));
  struct Case {
    Json args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"project", "ops"}}, "missing required field 'title'"},
      {{{"project", "ops"}, {"title", "t"}, {"priority", 9}}, "/priority: must be <= 4"},
      {{{"project", "ops"}, {"title", "t"}, {"assignee", "root"}}, "unknown field 'assignee'"},
      {{{"project", ".."}, {"title", "t"}}, "/project: must not be empty, '.' or '..'"},
      {{{"project", ""}, {"title", "t"}}, "/project: must not be empty"},
      {{{"project", 7}, {"title", "t"}}, "/project: expected string, got integer"},
  };
  int n = 0;
  for (const auto& c : cases) {
    const std::string rid = "bad" + std::to_string(++n);
    Json d = Decide("support", rid, c.args);
    EXPECT_EQ(d["verdict"], "deny") << c.args.dump();
    EXPECT_EQ(d["error_code"], "E_INVALID_ARGS") << c.args.dump();
    EXPECT_EQ(d["rule"], "alias:create_ticket");
    EXPECT_NE(d.value("reason", "").find(c.says), std::string::npos)
        << d["reason"] << " should say " << c.says;
  }
  // Execute refuses the same arguments by itself (a forged allow), before
  // anything starts.
  Json forged = Decide("support", "ok", {{"project", "ops"}, {"title", "t"}});
  ASSERT_EQ(forged["verdict"], "allow");
  bool started = true;
  Json r = Execute("support", "forged", {{"project", ".."}, {"title", "t"}}, forged, &started);
  EXPECT_EQ(Code(r), "E_INVALID_ARGS") << r.dump();
  EXPECT_FALSE(started);
  EXPECT_TRUE(s.targets().empty()) << "nothing reached the server";
}

// A pattern is applied with std::regex, which recurses once per character:
// an agent's 200,000-character argument would overflow the stack of the
// stage checking it. Such a string is refused unchecked, and nothing stops.
TEST_F(HttpAliasTest, AHugeArgumentAgainstAPatternIsRefusedNotMatched) {
  RecordingServer s;
  Load(Yaml(s, "  support:\n    mode: dangerous\n    http_request:\n      base_url: \"" + s.origin() +
                   "/\"\n      aliases:\n        note:\n          method: post\n          url: notes\n"
                   "          input_schema: {type: object, properties: {text: {type: string, pattern: "
                   "\"^[a-z]+$\"}}}\n"));
  tool_ = "note";
  Json huge = Decide("support", "h1", {{"text", std::string(200000, 'a')}});
  EXPECT_EQ(huge["verdict"], "deny");
  EXPECT_EQ(huge["error_code"], "E_INVALID_ARGS");
  EXPECT_NE(huge.value("reason", "").find("/text: longer than 4096 bytes"), std::string::npos)
      << huge["reason"];
  Json fine = Decide("support", "h2", {{"text", std::string(4000, 'a')}});
  ASSERT_EQ(fine["verdict"], "allow") << fine.dump();
  EXPECT_EQ(Decide("support", "h3", {{"text", "UPPER"}})["error_code"], "E_INVALID_ARGS")
      << "the pattern still holds";
  // Execute refuses it by itself too.
  EXPECT_EQ(Code(Execute("support", "h4", {{"text", std::string(200000, 'a')}}, fine)), "E_INVALID_ARGS");
  ASSERT_TRUE(Execute("support", "h2", {{"text", std::string(4000, 'a')}}, fine).value("success", false));
  EXPECT_EQ(s.targets(), std::vector<std::string>{"/notes"});
}

// An alias narrows what the agent may do; it opens nothing else. The
// policy's deny globs, rules and hosts list apply to the request it
// expands to, and its method is granted for it alone.
TEST_F(HttpAliasTest, AnAliasCannotWalkAroundTheHttpRules) {
  RecordingServer s;
  Load(Yaml(s, TicketAgent(s, "    deny: [\"http_request:POST " + s.origin() +
                                  "/api/projects/secret/*\"]\n"
                                  "    rules: [{tools: create_ticket, verdict: allow}]\n")));
  Json d = Decide("support", "g1", {{"project", "secret"}, {"title", "t"}});
  EXPECT_EQ(d["verdict"], "deny") << d.dump();
  EXPECT_EQ(d["error_code"], "E_POLICY_DENIED");
  // A deny rule on the URL's path.
  Load(Yaml(s, TicketAgent(s,
                           "    rules:\n      - {name: no-ops, tools: create_ticket, verdict: deny, when: "
                           "{path_prefix: /api/projects/ops/}}\n")));
  EXPECT_EQ(Decide("support", "g2", {{"project", "ops"}, {"title", "t"}})["rule"], "agent.rule:no-ops");
  EXPECT_EQ(Decide("support", "g3", {{"project", "dev"}, {"title", "t"}})["verdict"], "ask");
  // The hosts list.
  std::string hosts = TicketAgent(s);
  hosts.replace(hosts.find("      aliases:"), 0, "      hosts: [tickets.example.com]\n");
  Load(Yaml(s, hosts));
  EXPECT_EQ(Decide("support", "g4", {{"project", "ops"}, {"title", "t"}})["rule"], "http.hosts");
  // The alias's POST is not a POST for the agent's own http_request calls.
  Load(Yaml(s, TicketAgent(s)));
  tool_ = "http_request";
  Json free = Decide("support", "g5", {{"url", "projects/ops/tickets"}, {"method", "POST"}});
  EXPECT_EQ(free["verdict"], "deny");
  EXPECT_EQ(free["rule"], "http.allowed_methods");
  // Nor is it a tool for another agent.
  tool_ = "create_ticket";
  EXPECT_EQ(Decide("other", "g6", {{"project", "ops"}, {"title", "t"}})["rule"], "registry:unknown-tool");
  EXPECT_TRUE(s.targets().empty());
}

// Execute expands the call under its own view of the agent's aliases: one
// it does not have, or has with another URL, is not run.
TEST_F(HttpAliasTest, AnAliasExecuteDoesNotHaveAsDecidedIsRefusedAndNothingRuns) {
  RecordingServer s;
  Load(Yaml(s, TicketAgent(s, "    rules: [{tools: create_ticket, verdict: allow}]\n")));
  const Json args{{"project", "ops"}, {"title", "t"}};
  Json d = Decide("support", "x1", args);
  ASSERT_EQ(d["verdict"], "allow");
  Json moved = pif_.file()->doc();
  moved["orgs"]["o1"]["agents"]["support"]["http_request"]["aliases"]["create_ticket"]["url"] =
      "admin/{project}";
  LoadExecute(moved);
  bool started = true;
  EXPECT_EQ(Code(Execute("support", "x1", args, d, &started)), "E_DECISION_MISMATCH");
  EXPECT_FALSE(started);
  moved["orgs"]["o1"]["agents"]["support"]["http_request"].erase("aliases");
  LoadExecute(moved);
  EXPECT_EQ(Code(Execute("support", "x2", args, Decide("support", "x2", args))), "E_DECISION_MISMATCH");
  EXPECT_TRUE(s.targets().empty());
}

TEST_F(HttpAliasTest, TopLevelAliasesServeEveryAgentAndAnAgentsOwnWinByName) {
  RecordingServer s;
  const std::string yaml =
      "mode: ask\n"
      "execute:\n  network:\n    allow_cidrs: [127.0.0.0/8]\n"
      "http_request:\n"
      "  base_url: \"" +
      s.origin() +
      "/\"\n"
      "  aliases:\n"
      "    status: {method: GET, url: \"status/{service}\", description: Service status}\n"
      "    search: {method: GET, url: \"search\"}\n"
      "orgs:\n"
      "  o1:\n"
      "    agents:\n"
      "      special:\n"
      "        http_request:\n"
      "          aliases:\n"
      "            status: {method: GET, url: \"v2/status/{service}\"}\n";
  Load(yaml);
  tool_ = "status";
  Json a = Decide("anyone", "s1", {{"service", "db"}});
  EXPECT_EQ(a["verdict"], "allow") << "a GET is read-only: it runs" << a.dump();
  EXPECT_EQ(a["invocation"], "http_request:GET " + s.origin() + "/status/db");
  Json b = Decide("special", "s2", {{"service", "db"}});
  EXPECT_EQ(b["invocation"], "http_request:GET " + s.origin() + "/v2/status/db");
  ASSERT_TRUE(Execute("special", "s2", {{"service", "db"}}, b).value("success", false));
  // A GET alias sends its other arguments as the query.
  tool_ = "search";
  Json q = Decide("special", "s3", {{"q", "a b"}, {"limit", 5}});
  EXPECT_EQ(q["invocation"], "http_request:GET " + s.origin() + "/search?limit=5&q=a%20b");
  ASSERT_TRUE(Execute("special", "s3", {{"q", "a b"}, {"limit", 5}}, q).value("success", false));
  EXPECT_EQ(s.targets(), (std::vector<std::string>{"/v2/status/db", "/search?limit=5&q=a%20b"}));
  EXPECT_EQ(Decide("special", "s4", {{"q", Json::array({1})}})["error_code"], "E_INVALID_ARGS");

  // What tools/list shows each agent.
  ToolDirectory dir([] { return BuiltinDescriptors(); }, [this] { return pif_; });
  Json listed;
  ASSERT_TRUE(dir.List("o1", "special", &listed).ok());
  std::map<std::string, Json> by_name;
  for (const auto& t : listed["tools"]) by_name[t["name"]] = t;
  ASSERT_TRUE(by_name.count("status") && by_name.count("search")) << listed.dump();
  EXPECT_EQ(by_name["status"]["source"], "http");
  EXPECT_EQ(by_name["status"]["description"], "GET v2/status/{service}")
      << "the agent's own alias, described by its call";
  EXPECT_EQ(by_name["status"]["depends_on_arguments"], true);
  ASSERT_TRUE(dir.List("o1", "anyone", &listed).ok());
  for (const auto& t : listed["tools"]) {
    if (t["name"] == "status") EXPECT_EQ(t["description"], "Service status");
  }
}

TEST_F(HttpAliasTest, ToolsListShowsTheAliasSchemaAndThatItAsks) {
  RecordingServer s;
  Load(Yaml(s, TicketAgent(s)));
  ToolDirectory dir([] { return BuiltinDescriptors(); }, [this] { return pif_; });
  Json listed;
  ASSERT_TRUE(dir.List("o1", "support", &listed).ok());
  const Json* ticket = nullptr;
  for (const auto& t : listed["tools"]) {
    if (t["name"] == "create_ticket") ticket = &t;
  }
  ASSERT_NE(ticket, nullptr) << listed.dump();
  EXPECT_EQ((*ticket)["description"], "Open a ticket in the tracker");
  EXPECT_EQ((*ticket)["input_schema"]["required"], Json::array({"project", "title"}));
  EXPECT_EQ((*ticket)["read_only"], false);
  // What decide does with a call that fits (it asks: a POST), the list says.
  EXPECT_EQ((*ticket)["asks"], true) << ticket->dump();
  EXPECT_EQ(Decide("support", "t-ask", {{"project", "ops"}, {"title", "x"}})["verdict"], "ask");
  ASSERT_TRUE(dir.List("o1", "other", &listed).ok());
  for (const auto& t : listed["tools"]) EXPECT_NE(t["name"], "create_ticket") << "another agent's alias";
}

TEST_F(HttpAliasTest, ToolsListSaysAnAliasAllowedByItsRuleDoesNotAsk) {
  RecordingServer s;
  Load(Yaml(s, TicketAgent(s, "    rules: [{tools: create_ticket, verdict: allow}]\n")));
  ToolDirectory dir([] { return BuiltinDescriptors(); }, [this] { return pif_; });
  Json listed;
  ASSERT_TRUE(dir.List("o1", "support", &listed).ok());
  const Json* ticket = nullptr;
  for (const auto& t : listed["tools"]) {
    if (t["name"] == "create_ticket") ticket = &t;
  }
  ASSERT_NE(ticket, nullptr) << listed.dump();
  EXPECT_EQ((*ticket)["asks"], false) << ticket->dump();
  EXPECT_EQ(Decide("support", "t-allow", {{"project", "ops"}, {"title", "x"}})["verdict"], "allow");
}

TEST(HttpAliasPolicy, AMalformedAliasIsRefusedWithItsLine) {
  struct Case {
    std::string alias, says;
  };
  const std::vector<Case> cases = {
      {"echo: {method: GET, url: /x}", "'echo' is a built-in tool's name"},
      {"Bad-Name: {method: GET, url: /x}", "aliases"},
      {"a1: {method: GET, url: \"https://{host}/x\"}", "{host} is in the scheme or host"},
      {"a1: {method: GET, url: \"//elsewhere/x\"}", "not //host"},
      {"a1: {method: GET, url: \"/x/{a-b}\"}", "a placeholder is {name}"},
      {"a1: {method: GET, url: /x, input_schema: {type: 5}}", "input_schema"},
      {"a1: {method: GET, url: /x, input_schema: {$ref: \"http://127.0.0.1/s.json\"}}", "input_schema"},
      {"a1: {method: GET, url: /x, send: body}", "send"},
      {"a1: {url: /x}", "method"},
  };
  for (const auto& c : cases) {
    const std::string yaml =
        "mode: ask\norgs:\n  o1:\n    agents:\n      a:\n        http_request:\n          aliases:\n         "
        "   " +
        c.alias + "\n";
    PolicyPtr p;
    Status s = LoadPolicyYaml(yaml, "p.yaml", &p);
    ASSERT_FALSE(s.ok()) << c.alias;
    EXPECT_EQ(s.code(), "E_POLICY_INVALID") << c.alias;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message() << " should say " << c.says;
    EXPECT_NE(s.message().find("line "), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace tollgate

namespace tollgate {
namespace {

// Execute reads its own copy of the policy: a malformed alias there ends
// the call with a code, never an exception out of the stage.
TEST(HttpAliasPolicy, AMalformedAliasInExecutesCopyIsAnErrorNotAThrow) {
  ExecutePolicy p;
  p.orgs = {
      {"o1",
       {{"agents", {{"a", {{"http_request", {{"aliases", {{"t1", {{"method", 5}, {"url", "/x"}}}}}}}}}}}}}};
  const Json request{{"org_id", "o1"}, {"agent_id", "a"}, {"tool", "t1"}, {"args", Json::object()}};
  ResolvedCall call = ResolveCall(request, p);
  ASSERT_TRUE(call.error.is_object()) << call.tool;
  EXPECT_EQ(call.error["error"]["code"], "E_POLICY_INVALID");
  EXPECT_NE(call.error["error"]["message"].get<std::string>().find("method: a string"), std::string::npos);
}

}  // namespace
}  // namespace tollgate
