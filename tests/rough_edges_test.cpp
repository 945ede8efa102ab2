// Rough edges a new user met (issue 31) that have no test file of their
// own: error messages in the project's own words rather than the JSON
// library's (core/json_error.h), through the parser, the HTTP API and the
// real `tollgate agents sign`, which also says which numbers it accepts.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>

#include "core/json_error.h"
#include "deploy/pipeline.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::TempDir;

TEST(JsonErrorText, AParseErrorSaysWhereAndWhatWasExpectedWithoutEchoingTheInput) {
  Json out;
  Status s = ParseJson(R"({"token": "sk-secret-123)", &out);
  EXPECT_EQ(s.code(), errc::kInvalidJson);
  EXPECT_EQ(s.message().find("json.exception"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("sk-secret"), std::string::npos) << "the document's bytes are not echoed";
  EXPECT_NE(s.message().find("malformed JSON at byte"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(line 1, column"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("missing closing quote"), std::string::npos) << s.message();
  s = ParseJson("[1, 2", &out);
  EXPECT_NE(s.message().find("unexpected end of input; expected ']'"), std::string::npos) << s.message();
}

TEST(JsonErrorText, ANumberOutOfRangeSaysWhichRangeHolds) {
  Json out;
  Status s = ParseJson(R"({"n": 1e999})", &out);
  EXPECT_EQ(s.code(), errc::kNumberOutOfRange);
  EXPECT_EQ(s.message().find("json.exception"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1.7976931348623157e308"), std::string::npos) << s.message();
}

TEST(JsonErrorText, AWrongTypeNamesTheFieldWhenTheDocumentSaysWhichItIs) {
  const Json body{{"decision", "approve"}, {"comment", 5}};
  try {
    (void)body.value("comment", "");
    FAIL() << "no throw";
  } catch (const Json::exception& e) {
    EXPECT_EQ(JsonErrorText(e, &body), "/comment: expected a string, got a number");
    EXPECT_EQ(JsonErrorText(e), "a field has the wrong type: expected a string, got a number");
  }
  const Json list = Json::array({1, 2});
  try {
    (void)list.value("x", "");
    FAIL() << "no throw";
  } catch (const Json::exception& e) {
    EXPECT_EQ(JsonErrorText(e, &list), "the document: expected an object, got an array");
  }
  try {
    (void)body.at("missing");
    FAIL() << "no throw";
  } catch (const Json::exception& e) {
    EXPECT_EQ(JsonErrorText(e, &body), "missing required field 'missing'");
  }
}

// Runs the real binary; stderr into stdout.
testing::CommandResult Tollgate(const std::string& args) {
  return testing::RunCommand(std::string(TOLLGATE_BIN) + " " + args + " 2>&1");
}

TEST(AgentsSign, ANumberOutOfRangeIsReportedAsSuchWithTheRangeAccepted) {
  testing::CommandResult r =
      Tollgate(R"(agents sign --value '{"org_id":"o","agent_id":"a","request_id":"r","n":1e999}')");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("E_NUMBER_OUT_OF_RANGE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("magnitude at most 1.7976931348623157e308"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not a JSON object"), std::string::npos) << r.out;
}

TEST(AgentsSign, AFieldOfTheWrongTypeIsNamedAndNothingCrashes) {
  testing::CommandResult r = Tollgate(R"(agents sign --value '{"org_id":5,"agent_id":"a"}')");
  EXPECT_EQ(r.exit_code, 2) << "not an abort: " << r.out;
  EXPECT_NE(r.out.find("/org_id: expected a string, got number"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("json.exception"), std::string::npos) << r.out;
  r = Tollgate(R"(agents sign --value '[1]')");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("must be a JSON object, not array"), std::string::npos) << r.out;
  r = Tollgate(R"(agents sign --value '{"org_id":"o"}')");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("no agent_id"), std::string::npos) << r.out;
}

TEST(HttpApiErrors, ABodyFieldOfTheWrongTypeIsNamedInTheProjectsWords) {
  TempDir dir;
  PipelineOptions o;
  o.data_dir = dir.sub("data");
  o.durability = Durability::kBuffered;
  o.http_listen = "127.0.0.1:0";
  std::unique_ptr<Pipeline> p;
  ASSERT_TRUE(Pipeline::Start(o, &p).ok());
  std::string token;
  std::ifstream(o.data_dir + "/admin.token") >> token;
  ASSERT_FALSE(token.empty());
  httplib::Client http("127.0.0.1", p->api()->port());
  auto res = http.Post("/v1/rules/revoke", {{"Authorization", "Bearer " + token}},
                       R"({"agent_id": 7, "pattern": "builtin:echo"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  const Json body = Json::parse(res->body, nullptr, false);
  const std::string message = body["error"].value("message", "");
  EXPECT_EQ(message, "the body does not fit this call: /agent_id: expected a string, got a number")
      << res->body;
  EXPECT_EQ(res->body.find("json.exception"), std::string::npos) << res->body;
}

}  // namespace
}  // namespace tollgate
