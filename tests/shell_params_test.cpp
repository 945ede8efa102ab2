// What the shells (CLI, HTTP API, the get_audit_log tool) read from their
// callers, each read in one place: get_audit_log's parameters
// (audit/query_params.h), the bus and API a client subcommand finds from
// --data and its flags (deploy/endpoints.h), and an approver's answer
// (api/approval_response.h).
#include <gtest/gtest.h>

#include <fstream>

#include "api/approval_response.h"
#include "audit/log_audit_reader.h"
#include "audit/log_sink.h"
#include "audit/query_params.h"
#include "deploy/endpoints.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'790'000'000'000'000;

Status Build(const Json& params, AuditQuery* q) { return AuditQueryFromParams(params, q); }

std::string CodeOf(const Json& params) {
  AuditQuery q;
  return Build(params, &q).code();
}

TEST(AuditQueryParams, FillEveryFilterFromTheToolsNames) {
  AuditQuery q;
  ASSERT_TRUE(Build({{"org_id", "o1"},
                     {"agent_id", "a1"},
                     {"session_id", "s1"},
                     {"request_id", "r1"},
                     {"tool", "echo"},
                     {"types", {"request.received", "decision.made"}},
                     {"verdict", "deny"},
                     {"since", FormatTime(kT0)},
                     {"until", FormatTime(kT0 + 1'000'000)},
                     {"cursor", "c1"},
                     {"limit", 10},
                     {"descending", true}},
                    &q)
                  .ok());
  EXPECT_EQ(q.org_id, "o1");
  EXPECT_EQ(q.agent_id, "a1");
  EXPECT_EQ(q.session_id, "s1");
  EXPECT_EQ(q.request_id, "r1");
  EXPECT_EQ(q.tool, "echo");
  EXPECT_EQ(q.types, (std::vector<std::string>{"request.received", "decision.made"}));
  EXPECT_EQ(q.verdict, "deny");
  EXPECT_EQ(q.since_us, kT0);
  EXPECT_EQ(q.until_us, kT0 + 1'000'000);
  EXPECT_EQ(q.cursor, "c1");
  EXPECT_EQ(q.limit, 10u);
  EXPECT_TRUE(q.descending);
}

TEST(AuditQueryParams, LeaveAbsentFiltersAtTheirDefaultsAndIgnoreOtherKeys) {
  AuditQuery q;
  ASSERT_TRUE(Build({{"scope", "agent"}}, &q).ok());
  EXPECT_TRUE(q.org_id.empty() && q.agent_id.empty() && q.session_id.empty() && q.request_id.empty());
  EXPECT_TRUE(q.types.empty());
  EXPECT_FALSE(q.since_us.has_value());
  EXPECT_FALSE(q.until_us.has_value());
  EXPECT_EQ(q.limit, 0u);
  EXPECT_FALSE(q.descending);
  EXPECT_FALSE(q.json_lines) << "how records come back is the caller's choice";
}

TEST(AuditQueryParams, TakeTheStringFormsOfAQueryString) {
  AuditQuery q;
  ASSERT_TRUE(
      Build({{"limit", "25"}, {"descending", "1"}, {"types", "request.received,,decision.made"}}, &q).ok());
  EXPECT_EQ(q.limit, 25u);
  EXPECT_TRUE(q.descending);
  EXPECT_EQ(q.types, (std::vector<std::string>{"request.received", "decision.made"}));
  ASSERT_TRUE(Build({{"descending", "true"}}, &(q = AuditQuery())).ok());
  EXPECT_TRUE(q.descending);
  for (const char* no : {"0", "false", "yes", ""}) {
    ASSERT_TRUE(Build({{"descending", no}}, &(q = AuditQuery())).ok());
    EXPECT_FALSE(q.descending) << no;
  }
  ASSERT_TRUE(
      Build({{"types", {"request.received,decision.made", "result.published"}}}, &(q = AuditQuery())).ok());
  EXPECT_EQ(q.types.size(), 3u) << "each string of a list may name several types";
}

TEST(AuditQueryParams, RefuseEveryMalformedValueWithInvalidQuery) {
  const Json bad[] = {
      {{"agent_id", 7}},
      {{"session_id", Json::array()}},
      {{"cursor", false}},
      {{"types", 3}},
      {{"types", {"request.received", 4}}},
      {{"since", "yesterday"}},
      {{"until", ""}},
      {{"since", 1790000000}},
      {{"limit", -1}},
      {{"limit", 2.5}},
      {{"limit", "-1"}},
      {{"limit", "10abc"}},
      {{"limit", " 10"}},
      {{"limit", ""}},
      {{"limit", "99999999999999999999999"}},
      {{"descending", 1}},
  };
  for (const Json& params : bad) EXPECT_EQ(CodeOf(params), errc::kInvalidQuery) << params.dump();
  EXPECT_EQ(CodeOf(Json::array()), errc::kInvalidQuery);
}

TEST(AuditQueryParams, NameTheParameterThatIsWrong) {
  AuditQuery q;
  Status s = Build({{"since", "not a time"}}, &q);
  EXPECT_NE(s.message().find("since"), std::string::npos) << s.message();
  s = Build({{"limit", "ten"}}, &q);
  EXPECT_NE(s.message().find("limit"), std::string::npos) << s.message();
}

TEST(AuditQueryParams, MapTheHttpApisShortNamesAndDropEmptyValues) {
  const std::multimap<std::string, std::string> query{{"org", "o1"},
                                                      {"agent", "a1"},
                                                      {"session", "s1"},
                                                      {"request", "r1"},
                                                      {"tool", "echo"},
                                                      {"verdict", "ask"},
                                                      {"since", "2026-01-01T00:00:00Z"},
                                                      {"until", ""},
                                                      {"cursor", "c"},
                                                      {"limit", "5"},
                                                      {"desc", "1"},
                                                      {"type", "request.received,decision.made"},
                                                      {"type", "result.published"},
                                                      {"session", "second-ignored"},
                                                      {"unknown", "x"}};
  const Json params = AuditParamsFromQueryString(query);
  EXPECT_EQ(params, (Json{{"org_id", "o1"},
                          {"agent_id", "a1"},
                          {"session_id", "s1"},
                          {"request_id", "r1"},
                          {"tool", "echo"},
                          {"verdict", "ask"},
                          {"since", "2026-01-01T00:00:00Z"},
                          {"cursor", "c"},
                          {"limit", "5"},
                          {"descending", "1"},
                          {"types", {"request.received,decision.made", "result.published"}}}));
  AuditQuery q;
  ASSERT_TRUE(Build(params, &q).ok());
  EXPECT_EQ(q.types.size(), 3u);
  EXPECT_EQ(q.limit, 5u);
  EXPECT_TRUE(q.descending);
  EXPECT_FALSE(q.until_us.has_value()) << "until= (empty) is no bound";
  EXPECT_EQ(AuditParamsFromQueryString({}), Json::object());
}

// The tool's reader over a real log: the same parameters, scoped to the
// caller's org whatever the query names.
TEST(LogAuditReader, ReadsTheCallersOrgOnlyWithTheSameParameters) {
  TempDir dir;
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(EventLog::Open(dir.sub("log"), LogOptions{}, &log).ok());
  LogSink sink(*log);
  std::vector<EventSink::Appended> out;
  sink.AppendAll({testing::MakeEvent("request.received", "r1", "s1", "a1", "o1"),
                  testing::MakeEvent("request.received", "r2", "s1", "a1", "o2"),
                  testing::MakeEvent("request.received", "r3", "s2", "a1", "o1")},
                 &out);
  LogAuditReader reader(log->store());
  Json page;
  ASSERT_TRUE(reader.Query("o1", {{"org_id", "o2"}, {"agent_id", "a1"}, {"limit", "1"}}, &page).ok());
  ASSERT_EQ(page["events"].size(), 1u);
  EXPECT_EQ(page["events"][0]["org_id"], "o1");
  EXPECT_FALSE(page["next_cursor"].get<std::string>().empty());
  ASSERT_TRUE(reader.Query("o1", {{"agent_id", "a1"}, {"cursor", page["next_cursor"]}}, &page).ok());
  ASSERT_EQ(page["events"].size(), 1u);
  EXPECT_EQ(page["events"][0]["request_id"], "r3");
  EXPECT_EQ(reader.Query("o1", {{"since", "soon"}}, &page).code(), errc::kInvalidQuery);
}

class EndpointsTest : public ::testing::Test {
 protected:
  void WriteFile(const std::string& text) { std::ofstream(dir_.sub("endpoints.json")) << text; }
  TempDir dir_;
};

TEST_F(EndpointsTest, WrittenEndpointsReadBackWhole) {
  BusConfig bus;
  bus.brokers = "127.0.0.1:9092";
  bus.topics.prefix = "t.";
  Json ep = BusEndpoints(bus);
  EXPECT_EQ(ep["bootstrap"], "127.0.0.1:9092");
  EXPECT_EQ(ep["topic_prefix"], "t.");
  EXPECT_EQ(ep["pid"], getpid());
  ep["http"] = "http://127.0.0.1:8080";
  ASSERT_TRUE(WriteEndpoints(dir_.path(), ep).ok());
  Json back;
  ASSERT_TRUE(ReadEndpoints(dir_.path(), &back).ok());
  EXPECT_EQ(back, ep);
  EXPECT_FALSE(std::filesystem::exists(dir_.sub("endpoints.json.tmp")));
  EXPECT_EQ(EndpointsApiUrl(dir_.path()), "http://127.0.0.1:8080");
}

// endpoints.json says bootstrap 127.0.0.1:1111, prefix "ep.": each flag
// given wins over the file, and with --brokers the file is not read.
TEST_F(EndpointsTest, ClientBusLetsEachFlagGivenWinOverEndpoints) {
  ASSERT_TRUE(WriteEndpoints(dir_.path(), {{"bootstrap", "127.0.0.1:1111"}, {"topic_prefix", "ep."}}).ok());
  struct Case {
    std::string brokers, prefix, want_brokers, want_prefix;
  };
  const Case cases[] = {
      {"", "", "127.0.0.1:1111", "ep."},
      {"", "flag.", "127.0.0.1:1111", "flag."},
      {"127.0.0.1:2222", "", "127.0.0.1:2222", Topics().prefix},
      {"127.0.0.1:2222", "flag.", "127.0.0.1:2222", "flag."},
  };
  for (const Case& c : cases) {
    BusConfig bus;
    bus.topics.prefix = "stale.";
    ASSERT_TRUE(ClientBus(dir_.path(), c.brokers, c.prefix, &bus).ok()) << c.brokers << " " << c.prefix;
    EXPECT_EQ(bus.brokers, c.want_brokers) << c.brokers << " " << c.prefix;
    EXPECT_EQ(bus.topics.prefix, c.want_prefix) << c.brokers << " " << c.prefix;
  }
  BusConfig bus;
  EXPECT_TRUE(ClientBus(dir_.sub("nowhere"), "127.0.0.1:2222", "", &bus).ok())
      << "no file needed with --brokers";
}

TEST_F(EndpointsTest, ClientBusDefaultsAPrefixTheFileLeavesOut) {
  ASSERT_TRUE(WriteEndpoints(dir_.path(), {{"bootstrap", "127.0.0.1:1111"}}).ok());
  BusConfig bus;
  ASSERT_TRUE(ClientBus(dir_.path(), "", "", &bus).ok());
  EXPECT_EQ(bus.topics.prefix, Topics().prefix);
}

TEST_F(EndpointsTest, ClientBusWithoutFlagsOrFileSaysWhatToRun) {
  BusConfig bus;
  Status s = ClientBus(dir_.path(), "", "", &bus);
  EXPECT_EQ(s.code(), errc::kNotFound);
  EXPECT_NE(s.message().find("tollgate up --data " + dir_.path()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--brokers"), std::string::npos) << s.message();
  EXPECT_EQ(EndpointsApiUrl(dir_.path()), "");
}

TEST_F(EndpointsTest, AMalformedFileIsAnErrorNotACrash) {
  BusConfig bus;
  WriteFile("[1, 2]");
  EXPECT_FALSE(ClientBus(dir_.path(), "", "", &bus).ok());
  WriteFile(R"({"bootstrap": 7})");
  EXPECT_FALSE(ClientBus(dir_.path(), "", "", &bus).ok());
  WriteFile(R"({"bootstrap": "b:1", "http": ["x"]})");
  EXPECT_EQ(EndpointsApiUrl(dir_.path()), "");
  WriteFile("{not json");
  EXPECT_FALSE(ClientBus(dir_.path(), "", "", &bus).ok());
}

TEST_F(EndpointsTest, NoApiUrlWhenTheWriterServesNone) {
  ASSERT_TRUE(WriteEndpoints(dir_.path(), {{"bootstrap", "127.0.0.1:1111"}}).ok());
  EXPECT_EQ(EndpointsApiUrl(dir_.path()), "");
}

// The CLI's body and the API's response: the same fields, once.
TEST(ApprovalResponse, TheClisAnswerBecomesTheResponseTheApiPublishes) {
  const std::string hash(64, 'a');
  const Json answer = ApprovalAnswer("approve", true, "ok by me", "");
  EXPECT_EQ(answer, (Json{{"decision", "approve"}, {"scope", "always"}, {"comment", "ok by me"}}));
  Json resp;
  ASSERT_TRUE(ApprovalResponseFrom(answer, "r1", "o1", "alice", hash, &resp).ok());
  EXPECT_EQ(resp["request_id"], "r1");
  EXPECT_EQ(resp["org_id"], "o1");
  EXPECT_EQ(resp["approver"], "alice");
  EXPECT_EQ(resp["decision"], "approve");
  EXPECT_EQ(resp["scope"], "always");
  EXPECT_EQ(resp["comment"], "ok by me");
  EXPECT_EQ(resp["args_hash"], hash) << "the pending request's hash when the answer names none";
  EXPECT_EQ(resp["response_id"].get<std::string>().rfind("http-", 0), 0u);
  Json again;
  ASSERT_TRUE(ApprovalResponseFrom(answer, "r1", "o1", "alice", hash, &again).ok());
  EXPECT_NE(again["response_id"], resp["response_id"]);
}

TEST(ApprovalResponse, TheAnswersArgsHashAndOnceScopeAreKept) {
  const std::string mine(64, 'b');
  const Json answer = ApprovalAnswer("deny", false, "", mine);
  EXPECT_EQ(answer, (Json{{"decision", "deny"}, {"scope", "once"}, {"args_hash", mine}}));
  Json resp;
  ASSERT_TRUE(ApprovalResponseFrom(answer, "r1", "o1", "bob", std::string(64, 'a'), &resp).ok());
  EXPECT_EQ(resp["args_hash"], mine);
  EXPECT_EQ(resp["scope"], "once");
  EXPECT_FALSE(resp.contains("comment"));
}

TEST(ApprovalResponse, ABodyTheSchemaRefusesIsNamed) {
  Json resp;
  EXPECT_FALSE(ApprovalResponseFrom(Json::object(), "r1", "o1", "alice", std::string(64, 'a'), &resp).ok())
      << "no decision";
  Status s = ApprovalResponseFrom({{"decision", "maybe"}}, "r1", "o1", "alice", std::string(64, 'a'), &resp);
  EXPECT_FALSE(s.ok());
  s = ApprovalResponseFrom({{"decision", "approve"}, {"comment", 5}}, "r1", "o1", "alice",
                           std::string(64, 'a'), &resp);
  EXPECT_NE(s.message().find("/comment"), std::string::npos) << s.message();
  ASSERT_TRUE(ApprovalResponseFrom({{"decision", "approve"}, {"approver", "mallory"}}, "r1", "o1", "alice",
                                   std::string(64, 'a'), &resp)
                  .ok());
  EXPECT_EQ(resp["approver"], "alice") << "the body never names the approver";
}

}  // namespace
}  // namespace tollgate
