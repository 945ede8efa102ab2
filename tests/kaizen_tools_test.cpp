// Kaizen's 12 builtin MCP tools (issue 29; ../shared/seeds/000_17a0ddd065180edf.txt,
// "Builtin Tools"): each seed example is sent as the seed's agent sends it,
// execute_mcp_tool("mcp__kaizen_builtin__<tool>", params), through the real
// ingest (a signed request), the real policy engine and the real execute
// stage, against a loopback HTTP server or the agent's workspace. Asserted:
// the seed's danger level in the decision, its result fields, and that the
// http policy holds for the HTTP tools exactly as for http_request.
// Traffic only goes to 127.0.0.1.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/auth.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "core/tool_args.h"
#include "core/tool_catalog.h"
#include "core/tool_discovery.h"
#include "ingest/ingest_stage.h"
#include "tests/http_pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::HttpPipelineTest;
using testing::kT0;
using testing::RecordingServer;
using testing::Yaml;

// k1 may use every method; plain has the defaults (GET, HEAD).
const char* kAgents =
    "  k1:\n"
    "    http_request: {allowed_methods: [GET, HEAD, POST, PUT, DELETE]}\n"
    "  plain: {}\n";

class KaizenToolsTest : public HttpPipelineTest {
 protected:
  void SetUp() override { chmod(dir_.path().c_str(), 0755); }  // commands run as another uid when root

  struct Call {
    Json received;  // request.received's data
    Json decision;
    Json result;  // the ToolResult (null when decide denied)
  };

  // The seed's execute_mcp_tool("mcp__kaizen_builtin__" + tool, args) by
  // `agent`: ingested, decided and, unless denied, executed; an asked call
  // runs as an approver would have granted it (`approve`).
  Call Kaizen(const std::string& agent, const std::string& tool, const Json& args, bool approve = true) {
    Call c;
    const std::string rid = "kz-" + std::to_string(++calls_);
    const Json sent{{"request_id", rid},
                    {"org_id", org_},
                    {"agent_id", agent},
                    {"session_id", "s1"},
                    {"tool", "mcp__kaizen_builtin__" + tool},
                    {"args", args}};
    StageResult in = Ingest(sent);
    if (in.events.empty() || in.events[0].type != "request.received") {
      ADD_FAILURE() << "ingest refused " << tool << ": "
                    << (in.events.empty() ? "" : in.events[0].data.dump());
      return c;
    }
    c.received = in.events[0].data;
    const Json request = Json::parse(in.outputs.at(0).message.value)["request"];
    c.decision = tollgate::Decide(pif_, BudgetLedger(), DecideInput{&request, kT0});
    if (c.decision["verdict"] == "deny" || (c.decision["verdict"] == "ask" && !approve)) return c;
    Json granted = c.decision;
    granted["verdict"] = "allow";
    tool_ = request["tool"];
    c.result = Execute(agent, rid, request["args"], granted);
    return c;
  }

  // One signed request through the real ingest stage.
  StageResult Ingest(const Json& request) {
    const std::string agent = request.value("agent_id", "");
    auto it = signers_.find(agent);
    if (it == signers_.end()) {
      Credential cred;
      JwtSigner s;
      EXPECT_TRUE(NewSigningKey("agent_key", org_, agent, {"agent"}, "test", &cred, &s).ok());
      creds_.Apply(CredentialAddedEvent(cred, kT0 - 1'000'000));
      it = signers_.emplace(agent, std::move(s)).first;
    }
    Message m;
    m.topic = "tollgate.requests";
    m.key = agent;
    m.value = request.dump();
    m.headers[kHeaderAuth] =
        SignRequest(it->second, org_, agent, request.value("request_id", ""), m.value, kT0 / 1'000'000);
    IngestConfig ic;
    ic.credentials = &creds_;
    IngestStage ingest(ic);
    return ingest.Process(m, {kT0, "inc/tollgate.requests/0/" + std::to_string(calls_)}, ingest_log_);
  }

  static const Json& Data(const Call& c) { return c.result["data"]; }

  CredentialRegistry creds_;
  std::map<std::string, JwtSigner> signers_;
  testing::MemoryLog ingest_log_;
  int calls_ = 0;
};

TEST_F(KaizenToolsTest, EveryPrefixedNameIsTheBuiltinOfThatNameAndNothingElseIs) {
  const char* kTwelve[] = {"read_file",   "write_file", "delete_file",   "list_directory",
                           "file_exists", "http_get",   "http_post",     "http_put",
                           "http_delete", "fetch_url",  "extract_links", "bash_command"};
  for (const char* t : kTwelve) {
    const std::string prefixed = std::string("mcp__kaizen_builtin__") + t;
    EXPECT_EQ(CanonicalToolName(prefixed), t);
    EXPECT_NE(FindBuiltinTool(t), nullptr) << t;
    EXPECT_EQ(McpToolPattern(prefixed), t) << "a policy's name for it";
    EXPECT_EQ(ToolFromClientName(prefixed), t) << "the MCP gateway's";
  }
  for (const char* other : {"mcp__kaizen_builtin__echo", "mcp__kaizen_builtin__nope",
                            "mcp__github__read_file", "read_file", "mcp__kaizen_builtin__"}) {
    EXPECT_EQ(CanonicalToolName(other), other);
  }
  EXPECT_EQ(ToolFromClientName("mcp__github__read_file"), "mcp:github/read_file")
      << "other servers stay upstreams";
}

TEST_F(KaizenToolsTest, ThePrefixedReadFileIsIngestedDecidedAndRunAsReadFile) {
  RecordingServer s;
  Load(Yaml(s, kAgents));
  Kaizen("k1", "write_file", {{"path", "test.txt"}, {"content", "content of the test file"}});
  Call c = Kaizen("k1", "read_file", {{"path", "test.txt"}});
  EXPECT_EQ(c.received["request"]["tool"], "read_file") << "the log holds the built-in's name";
  EXPECT_EQ(c.received["tool_called"], "mcp__kaizen_builtin__read_file") << "and the name the agent used";
  EXPECT_EQ(c.decision["verdict"], "allow") << c.decision.dump();
  EXPECT_EQ(c.decision["danger_level"], "SAFE");
  EXPECT_EQ(c.decision["invocation"], "builtin:read_file");
  EXPECT_EQ(c.decision["subject"], "read_file:test.txt");
  ASSERT_TRUE(c.result.value("success", false)) << c.result.dump();
  EXPECT_EQ(Data(c)["output"], "content of the test file") << "the seed's result[\"output\"]";
  // A policy naming read_file holds for the prefixed name too.
  Load(Yaml(s, "  k1:\n    deny: [\"read_file:test.txt\"]\n"));
  EXPECT_EQ(Kaizen("k1", "read_file", {{"path", "test.txt"}}).decision["verdict"], "deny");
}

TEST_F(KaizenToolsTest, ThePrefixedNameIsHeldToTheBuiltinsArgumentContract) {
  StageResult r = Ingest({{"request_id", "bad-1"},
                          {"org_id", org_},
                          {"agent_id", "k1"},
                          {"session_id", "s1"},
                          {"tool", "mcp__kaizen_builtin__read_file"},
                          {"args", {{"path", "a.txt"}, {"mode", "rb"}}}});
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.rejected");
  EXPECT_EQ(r.events[0].data["error"]["code"], "E_INVALID_ARGS");
  EXPECT_NE(r.events[0].data["error"]["message"].get<std::string>().find("/args"), std::string::npos)
      << r.events[0].data.dump();
}

TEST_F(KaizenToolsTest, TheFileToolsAnswerWithTheSeedsOutputAndDangerLevels) {
  RecordingServer s;
  Load(Yaml(s, kAgents));
  Call w = Kaizen("k1", "write_file", {{"path", "output.txt"}, {"content", "Hello World"}});
  EXPECT_EQ(w.decision["danger_level"], "MEDIUM");
  EXPECT_EQ(w.decision["verdict"], "ask") << "MEDIUM: requires approval";
  ASSERT_TRUE(w.result.value("success", false)) << w.result.dump();
  Call l = Kaizen("k1", "list_directory", {{"path", "."}});
  EXPECT_EQ(l.decision["danger_level"], "SAFE");
  EXPECT_EQ(l.decision["verdict"], "allow");
  ASSERT_TRUE(l.result.value("success", false)) << l.result.dump();
  EXPECT_EQ(Data(l)["output"], Json::array({"output.txt"}));
  Call e = Kaizen("k1", "file_exists", {{"path", "output.txt"}});
  EXPECT_EQ(e.decision["danger_level"], "SAFE");
  EXPECT_EQ(e.decision["verdict"], "allow");
  EXPECT_EQ(Data(e)["output"], "true");
  Call d = Kaizen("k1", "delete_file", {{"path", "output.txt"}});
  EXPECT_EQ(d.decision["danger_level"], "HIGH");
  EXPECT_EQ(d.decision["verdict"], "ask") << "HIGH: requires approval";
  ASSERT_TRUE(d.result.value("success", false)) << d.result.dump();
  EXPECT_EQ(Data(Kaizen("k1", "file_exists", {{"path", "output.txt"}}))["output"], "false");
}

TEST_F(KaizenToolsTest, HttpGetIsSafeRunsWithoutApprovalAndAnswersWithTheJson) {
  RecordingServer s;
  s.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"items": [1, 2]})", "application/json");
  };
  Load(Yaml(s, kAgents));
  Call c = Kaizen("plain", "http_get", {{"url", s.origin() + "/data"}, {"headers", {{"X-Trace", "t1"}}}});
  EXPECT_EQ(c.decision["verdict"], "allow") << c.decision.dump();
  EXPECT_EQ(c.decision["danger_level"], "SAFE");
  EXPECT_EQ(c.decision["read_only"], true);
  EXPECT_EQ(c.decision["invocation"], "http_request:GET " + s.origin() + "/data")
      << "decided as http_request";
  ASSERT_TRUE(c.result.value("success", false)) << c.result.dump();
  EXPECT_EQ(Data(c)["output"], (Json{{"items", {1, 2}}})) << "the seed's \"JSON response\"";
  EXPECT_EQ(Data(c)["status_code"], 200) << "http_request's fields stay";
  EXPECT_EQ(s.methods(), std::vector<std::string>{"GET"});
  EXPECT_EQ(s.last_headers().find("X-Trace")->second, "t1");
}

TEST_F(KaizenToolsTest, HttpPostAndPutAreMediumAskAndSendDataAsTheBody) {
  RecordingServer s;
  s.handler = [](const httplib::Request& req, httplib::Response& res) {
    res.set_content("saved " + req.method, "text/plain");
  };
  Load(Yaml(s, kAgents));
  Call post = Kaizen("k1", "http_post",
                     {{"url", s.origin() + "/submit"},
                      {"data", {{"name", "Test"}, {"value", 123}}},
                      {"headers", {{"Content-Type", "application/json"}}}});
  EXPECT_EQ(post.decision["danger_level"], "MEDIUM");
  EXPECT_EQ(post.decision["verdict"], "ask");
  EXPECT_EQ(post.decision["invocation"], "http_request:POST " + s.origin() + "/submit");
  ASSERT_TRUE(post.result.value("success", false)) << post.result.dump();
  EXPECT_EQ(Data(post)["output"], "saved POST") << "a text response: its text";
  Call put =
      Kaizen("k1", "http_put", {{"url", s.origin() + "/update/123"}, {"data", {{"status", "active"}}}});
  EXPECT_EQ(put.decision["danger_level"], "MEDIUM");
  EXPECT_EQ(put.decision["verdict"], "ask");
  ASSERT_TRUE(put.result.value("success", false)) << put.result.dump();
  Call text = Kaizen("k1", "http_post", {{"url", s.origin() + "/raw"}, {"data", "a=1&b=2"}});
  ASSERT_TRUE(text.result.value("success", false)) << text.result.dump();
  EXPECT_EQ(s.methods(), (std::vector<std::string>{"POST", "PUT", "POST"}));
  const auto bodies = s.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(Json::parse(bodies[0]), (Json{{"name", "Test"}, {"value", 123}})) << "a dict is sent as JSON";
  EXPECT_EQ(Json::parse(bodies[1]), (Json{{"status", "active"}}));
  EXPECT_EQ(bodies[2], "a=1&b=2") << "a string is sent as it is";
}

TEST_F(KaizenToolsTest, HttpDeleteIsHighAndAsksUnderTheDefaultMode) {
  RecordingServer s;
  s.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content("deleted", "text/plain");
  };
  Load(Yaml(s, kAgents));
  Call asked = Kaizen("k1", "http_delete", {{"url", s.origin() + "/resource/123"}}, /*approve=*/false);
  EXPECT_EQ(asked.decision["verdict"], "ask") << asked.decision.dump();
  EXPECT_EQ(asked.decision["danger_level"], "HIGH");
  EXPECT_EQ(asked.decision["read_only"], false);
  EXPECT_TRUE(s.methods().empty()) << "nothing is sent before an approver grants it";
  Call granted = Kaizen("k1", "http_delete", {{"url", s.origin() + "/resource/123"}});
  ASSERT_TRUE(granted.result.value("success", false)) << granted.result.dump();
  EXPECT_EQ(Data(granted)["output"], "deleted");
  EXPECT_EQ(s.methods(), std::vector<std::string>{"DELETE"});
  EXPECT_EQ(s.targets(), std::vector<std::string>{"/resource/123"});
}

TEST_F(KaizenToolsTest, TheHttpPolicyHoldsForTheHttpToolsAsForHttpRequest) {
  RecordingServer s;
  Load(Yaml(s, kAgents + std::string(
                             "  guarded:\n"
                             "    http_request: {allowed_methods: [GET, DELETE], hosts: [api.example.com]}\n"
                             "  no_delete:\n"
                             "    http_request: {allowed_methods: [GET, DELETE]}\n"
                             "    deny: [\"http_request:DELETE *\"]\n")));
  // The fixed method is no grant: allowed_methods decides, at decide...
  Call d = Kaizen("plain", "http_delete", {{"url", s.origin() + "/x"}});
  EXPECT_EQ(d.decision["verdict"], "deny");
  EXPECT_EQ(d.decision["rule"], "http.allowed_methods");
  // ...and again at execute, should a decision let it through.
  tool_ = "http_delete";
  Json allow{{"verdict", "allow"},
             {"reason", "t"},
             {"rule", "t"},
             {"danger_level", "HIGH"},
             {"invocation", "http_request:DELETE " + s.origin() + "/x"},
             {"read_only", false}};
  Json r = Execute("plain", "exec-1", {{"url", s.origin() + "/x"}}, allow);
  EXPECT_EQ(Code(r), "E_HTTP_METHOD") << r.dump();
  // Deny globs on the invocation and the hosts list hold.
  EXPECT_EQ(Kaizen("no_delete", "http_delete", {{"url", s.origin() + "/x"}}).decision["verdict"], "deny");
  Call h = Kaizen("guarded", "http_get", {{"url", s.origin() + "/x"}});
  EXPECT_EQ(h.decision["verdict"], "deny");
  EXPECT_EQ(h.decision["rule"], "http.hosts");
  EXPECT_TRUE(s.methods().empty()) << "nothing reached the server";
  // A method argument cannot turn a GET into a DELETE: not in the contract.
  EXPECT_EQ(CheckToolArgs("http_get", {{"url", s.origin() + "/x"}, {"method", "DELETE"}}).code(),
            "E_INVALID_ARGS");
  tool_ = "http_get";
  Json sneaky = Decide("k1", "dec-1", {{"url", s.origin() + "/x"}, {"method", "DELETE"}});
  EXPECT_EQ(sneaky["verdict"], "deny");
  EXPECT_EQ(sneaky["error_code"], "E_INVALID_ARGS");
}

TEST_F(KaizenToolsTest, APolicyFileStillSetsTheirDangerAndGrantsThemByEitherName) {
  RecordingServer s;
  Load(
      "mode: ask\n"
      "tools:\n"
      "  mcp__kaizen_builtin__http_get: {danger: HIGH}\n"
      "tool_allowlist: [mcp__kaizen_builtin__http_get, fetch_url]\n"
      "execute:\n  network:\n    allow_cidrs: [127.0.0.0/8]\n");
  Call c = Kaizen("any", "http_get", {{"url", s.origin() + "/x"}}, /*approve=*/false);
  EXPECT_EQ(c.decision["danger_level"], "HIGH");
  EXPECT_EQ(c.decision["verdict"], "ask") << c.decision.dump();
  EXPECT_EQ(Kaizen("any", "fetch_url", {{"url", s.origin() + "/x"}}).decision["verdict"], "allow");
  EXPECT_EQ(Kaizen("any", "http_post", {{"url", s.origin() + "/x"}}).decision["rule"], "org.tool_allowlist");
  // Where a policy could only mean something else, it is refused.
  for (const char* bad :
       {"deny: [mcp__kaizen_builtin__read_file]\n", "tool_allowlist: [\"mcp__kaizen_builtin__*\"]\n",
        "tool_allowlist: [mcp__kaizen_builtin]\n"}) {
    PolicyPtr p;
    EXPECT_FALSE(LoadPolicyYaml(bad, "bad.yaml", &p).ok()) << bad;
  }
  ExecutePolicy ep;
  Status upstream = ExecutePolicyFromJson(
      Json{{"execute", {{"mcp_servers", {{"kaizen_builtin", {{"command", {"/bin/true"}}}}}}}}}, dir_.path(),
      &ep);
  EXPECT_NE(upstream.message().find("reserved"), std::string::npos)
      << "never an upstream server: " << upstream.ToString();
}

TEST_F(KaizenToolsTest, FetchUrlIsSafeAndAnswersWithThePage) {
  RecordingServer s;
  const std::string page = "<html><body><h1>Example</h1></body></html>";
  s.handler = [&](const httplib::Request&, httplib::Response& res) { res.set_content(page, "text/html"); };
  Load(Yaml(s, kAgents));
  Call c = Kaizen("plain", "fetch_url", {{"url", s.origin() + "/"}});
  EXPECT_EQ(c.decision["verdict"], "allow");
  EXPECT_EQ(c.decision["danger_level"], "SAFE");
  ASSERT_TRUE(c.result.value("success", false)) << c.result.dump();
  EXPECT_EQ(Data(c)["output"], page) << "the seed's \"HTML content\"";
}

TEST_F(KaizenToolsTest, ExtractLinksGivesEachLinkOnceResolvedAgainstTheFinalUrl) {
  RecordingServer s;
  s.handler = [](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/start") {
      res.status = 302;
      res.set_header("Location", "/docs/page.html");
      return;
    }
    res.set_content(R"HTML(<!DOCTYPE html><html><head><title>see <a href="/in-title">x</a></title>
<script>var s = '<a href="/in-script">';</script></head><body>
<a href="a.html">A</a>
<A HREF='../b.html?x=1&amp;y=2'>B</A>
<a class=x href=/c>C</a>
<a href="https://example.com/x#frag">external</a>
<a href="./a.html">A again</a> <a href="a.html#part">A, a part</a>
<a href="#top">top</a> <a href="mailto:someone@example.com">mail</a> <a href="javascript:alert(1)">js</a>
<!-- <a href="/in-comment">hidden</a> -->
<link href="/style.css" rel="stylesheet"><a name="anchor">no href</a>
<a href="  /d  ">spaces</a>
</body></html>)HTML",
                    "text/html");
  };
  Load(Yaml(s, kAgents));
  Call c = Kaizen("plain", "extract_links", {{"url", s.origin() + "/start"}});
  EXPECT_EQ(c.decision["verdict"], "allow");
  EXPECT_EQ(c.decision["danger_level"], "SAFE");
  ASSERT_TRUE(c.result.value("success", false)) << c.result.dump();
  const std::string o = s.origin();
  const Json want =
      Json::array({o + "/docs/a.html", o + "/b.html?x=1&y=2", o + "/c", "https://example.com/x", o + "/d"});
  EXPECT_EQ(Data(c)["output"], want);
  EXPECT_EQ(Data(c)["links"], want);
  EXPECT_EQ(Data(c)["count"], 5);
  EXPECT_EQ(Data(c)["links_truncated"], false);
  EXPECT_EQ(Data(c)["url"], o + "/docs/page.html") << "the final URL, after the redirect";
}

TEST_F(KaizenToolsTest, BashCommandIsHighAndRunsTheLineInTheSandboxWithKaizensFields) {
  RecordingServer s;
  Load(Yaml(s, kAgents));
  Kaizen("k1", "write_file", {{"path", "notes.txt"}, {"content", "hi"}});
  Call asked = Kaizen("k1", "bash_command", {{"command", "ls -la"}}, /*approve=*/false);
  EXPECT_EQ(asked.decision["verdict"], "ask") << "HIGH: approval every time";
  EXPECT_EQ(asked.decision["danger_level"], "HIGH");
  EXPECT_EQ(asked.decision["invocation"], "bash:ls -la") << "matched as execute_command's line";
  Call c = Kaizen("k1", "bash_command", {{"command", "ls -la"}});
  ASSERT_TRUE(c.result.value("success", false)) << c.result.dump();
  EXPECT_NE(Data(c)["stdout"].get<std::string>().find("notes.txt"), std::string::npos) << Data(c).dump();
  EXPECT_EQ(Data(c)["output"], Data(c)["stdout"]);
  EXPECT_EQ(Data(c)["stderr"], "");
  EXPECT_EQ(Data(c)["exit_code"], 0);
  EXPECT_EQ(c.result["meta"]["sandbox"], true);
  EXPECT_EQ(c.result["meta"]["command"], "ls -la");
  // A failing line still answers with its output and exit code.
  Call fail = Kaizen("k1", "bash_command", {{"command", "ls notes.txt missing.txt"}});
  EXPECT_FALSE(fail.result.value("success", true));
  EXPECT_EQ(Code(fail.result), "E_TOOL_EXEC");
  EXPECT_NE(Data(fail)["exit_code"], 0);
  EXPECT_EQ(Data(fail)["output"], "notes.txt\n");
  EXPECT_NE(Data(fail)["stderr"].get<std::string>().find("missing.txt"), std::string::npos);
  // Each simple command is checked: a shell at the end of a pipe never runs.
  Call piped = Kaizen("k1", "bash_command", {{"command", "ls | sh"}});
  EXPECT_EQ(Code(piped.result), "E_CMD_NOT_ALLOWED") << piped.result.dump();
  // A policy's bash: globs hold for it as for execute_command.
  Load(Yaml(s, "  k1:\n    deny: [\"bash:ls *\"]\n"));
  EXPECT_EQ(Kaizen("k1", "bash_command", {{"command", "true && ls -la"}}).decision["verdict"], "deny");
}

}  // namespace
}  // namespace tollgate
