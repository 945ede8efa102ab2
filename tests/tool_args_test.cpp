// A seed's parameter is a real parameter (issue 29): http_request's `data`
// (the AI Orchestrator's JSON payload) is the body the server receives.
// Decided by the real policy engine, run by the real execute stage against
// a loopback server.
#include "core/tool_args.h"

#include "core/tool_catalog.h"
#include "tests/http_pipeline_fixture.h"
#include "tests/pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::HttpPipelineTest;
using testing::RecordingServer;
using testing::Yaml;
using ToolArgsTest = HttpPipelineTest;

TEST_F(ToolArgsTest, TheSeedsDataArgumentIsTheJsonBodyThatReachesTheServer) {
  RecordingServer s;
  Load(Yaml(s, "  a1:\n    mode: dangerous\n    http_request: {allowed_methods: [GET, POST]}\n"));
  const Json args{
      {"url", s.origin() + "/orders"}, {"method", "POST"}, {"data", {{"item", "book"}, {"n", 2}}}};
  Json d = Decide("a1", "r-data", args);
  ASSERT_EQ(d["verdict"], "allow") << d.dump();
  Json r = Execute("a1", "r-data", args, d);
  EXPECT_TRUE(r.value("success", false)) << r.dump();
  ASSERT_EQ(s.bodies().size(), 1u);
  EXPECT_EQ(Json::parse(s.bodies()[0]), args["data"]) << "the payload went out, not an empty POST";
  EXPECT_EQ(s.last_headers().find("Content-Type")->second, "application/json");
  // json and data together are one payload too many.
  const Json both{
      {"url", s.origin() + "/orders"}, {"method", "POST"}, {"data", {{"a", 1}}}, {"json", {{"b", 2}}}};
  Json r2 = Execute("a1", "r-both", both, Decide("a1", "r-both", both));
  EXPECT_EQ(Code(r2), "E_INVALID_ARGS") << r2.dump();
  EXPECT_EQ(s.bodies().size(), 1u) << "nothing was sent";
}

TEST(ToolArgs, EveryBuiltinsSchemaCompilesAndRefusesAnUnknownArgumentByName) {
  for (const ToolFacts& t : BuiltinTools()) {
    Status s = CheckToolArgs(t.name, Json{{"no_such_argument", 1}});
    if (t.name == "echo") {
      EXPECT_TRUE(s.ok()) << "echo returns whatever it is given";
      continue;
    }
    EXPECT_EQ(s.code(), "E_INVALID_ARGS") << t.name;
    EXPECT_NE(s.message().find("/args"), std::string::npos) << t.name << ": " << s.message();
    EXPECT_EQ(s.message().find("does not compile"), std::string::npos) << t.name << ": " << s.message();
  }
}

TEST(ToolArgs, AnIllTypedOrMissingArgumentIsNamedAndItsValueIsNot) {
  Status s = CheckToolArgs("read_file", Json{{"path", 42}});
  EXPECT_EQ(s.code(), "E_INVALID_ARGS");
  EXPECT_NE(s.message().find("/args/path"), std::string::npos) << s.message();
  s = CheckToolArgs("write_file", Json{{"path", "a.txt"}, {"content", "sk-secret-value"}, {"append", "yes"}});
  EXPECT_NE(s.message().find("/args/append"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("yes"), std::string::npos) << "values never reach the message (or the log)";
  s = CheckToolArgs("read_file", Json::object());
  EXPECT_EQ(s.code(), "E_INVALID_ARGS") << "path is required";
  EXPECT_TRUE(CheckToolArgs("read_file", Json{{"path", "a.txt"}}).ok());
  EXPECT_TRUE(CheckToolArgs("cli:deploy", Json{{"anything", 1}}).ok()) << "not a built-in: its own contract";
}

// Through the real pipeline (a signed request on Kafka, as any agent sends
// it): an argument the tool does not take is a rejection naming it and an
// event in the log, never a call that runs without it.
class ToolContractPipelineTest : public testing::PolicyPipelineTest {
 protected:
  void SetUp() override { StartWith("version: 1\nmode: dangerous\nexecute: {writes_enabled: true}\n"); }
};

TEST_F(ToolContractPipelineTest, AnUnknownOrIllTypedArgumentOnKafkaIsRejectedNamingItAndLogged) {
  Json r = Call("unknown-arg", "write_file", {{"path", "a.txt"}, {"content", "x"}, {"mode", "0777"}});
  ASSERT_EQ(r["status"], "rejected") << r.dump();
  EXPECT_EQ(r["result"]["error"]["code"], "E_INVALID_ARGS");
  EXPECT_NE(r["result"]["error"]["message"].get<std::string>().find("unknown field 'mode'"),
            std::string::npos)
      << r.dump();
  bool logged = false;
  for (uint64_t seq = 1; seq <= p_->log().head_seq(); ++seq) {
    Event e;
    if (p_->log().store().ReadEvent(seq, &e).ok() && e.type == "request.rejected" &&
        e.request_id == "unknown-arg") {
      logged = e.data["error"]["code"] == "E_INVALID_ARGS";
    }
  }
  EXPECT_TRUE(logged) << "the rejection is in the log";
  EXPECT_FALSE(std::filesystem::exists(dir_.sub("data") + "/workspaces/org-1/agent-1/a.txt"));
  // The same call without the stray argument runs.
  Json ok = Call("known-args", "write_file", {{"path", "a.txt"}, {"content", "x"}});
  EXPECT_EQ(ok["status"], "completed") << ok.dump();

  // Ill-typed: rejected before decide.
  r = Call("ill-typed", "http_request", {{"url", "http://127.0.0.1:9/x"}, {"timeout_ms", "soon"}});
  ASSERT_EQ(r["status"], "rejected") << r.dump();
  EXPECT_EQ(r["result"]["error"]["code"], "E_INVALID_ARGS");
  EXPECT_NE(r["result"]["error"]["message"].get<std::string>().find("/args/timeout_ms"), std::string::npos);
  EXPECT_TRUE(r["decision"].is_null() || r["decision"].empty()) << "never decided: " << r.dump();
}

}  // namespace
}  // namespace tollgate
