// The compliance report (audit/compliance_report.h): the fold of a
// request's events into one row, on hand-made events; its filters and
// tenancy over a real log in a temp dir; its writers, whose cells are
// agent-supplied and so hostile (spreadsheet formulas, terminal escapes);
// and, end to end, the compliance officer's question of issue 32 answered
// by one `tollgate audit report` over a running pipeline, its CSV read by
// Python's csv module. Network traffic stays on 127.0.0.1.
#include "audit/compliance_report.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "api/tokens.h"
#include "audit/event_log.h"
#include "core/messages.h"
#include "core/tlog_proof.h"
#include "deploy/pipeline.h"
#include "test_util.h"
#include "tests/agent_keys.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'790'000'000'000'000;  // 2026-09-21T...Z
constexpr int64_t kSecond = 1'000'000;

ReportFilter Filter(const std::function<void(ReportFilter&)>& set) {
  ReportFilter f;
  set(f);
  return f;
}

// Events of calls, numbered as a log would number them.
class Calls {
 public:
  // One event of `request`; `at` seconds after kT0.
  Event& Add(const std::string& type, const std::string& request, double at, Json data = Json::object(),
             const std::string& discriminator = "") {
    Event e;
    e.seq = ++seq_;
    e.type = type;
    e.org_id = org;
    e.agent_id = agent;
    e.session_id = session;
    e.request_id = request;
    e.tool = tool;
    e.time_us = kT0 + static_cast<int64_t>(at * kSecond);
    e.id = MakeRequestEventId(org, type, request, discriminator);
    e.data = std::move(data);
    events.push_back(std::move(e));
    return events.back();
  }
  void Received(const std::string& request, double at, Json extra = Json::object()) {
    Json d{{"request", {{"request_id", request}, {"tool", tool}, {"args", Json::object()}}},
           {"args_hash", "h"},
           {"received_at", FormatTime(kT0 + static_cast<int64_t>(at * kSecond))}};
    d.update(extra);
    Add(ev::kRequestReceived, request, at, d);
  }
  void Decided(const std::string& request, double at, const std::string& verdict,
               const std::string& invocation, Json extra = Json::object()) {
    Json d{{"verdict", verdict},
           {"reason", "because " + verdict},
           {"rule", "rule-" + verdict},
           {"danger_level", "MEDIUM"},
           {"policy_version", "pv-7"},
           {"invocation", invocation},
           {"reservation", {{"usd", 0.25}}}};
    d.update(extra);
    Add(ev::kDecisionMade, request, at, d);
  }
  void Completed(const std::string& request, double at, bool success, double cost) {
    Json result{{"success", success}, {"data", Json::object()}};
    if (!success) result["error"] = {{"code", "E_TOOL_EXEC"}, {"message", "boom"}, {"recoverable", false}};
    Add(ev::kExecutionStarted, request, at - 0.5, {{"executor", "x"}, {"attempt", 1}});
    Add(ev::kExecutionCompleted, request, at,
        {{"result", result}, {"duration_ms", 12.5}, {"cost_usd", cost}});
  }
  void Answered(const std::string& request, double at, const std::string& approver, bool grant,
                const std::string& comment) {
    Add(grant ? ev::kApprovalGranted : ev::kApprovalDenied, request, at,
        {{"approver", approver}, {"scope", "once"}, {"comment", comment}}, approver);
  }

  std::string org = "o1", agent = "a1", session = "s1", tool = "echo";
  std::vector<Event> events;

 private:
  uint64_t seq_ = 0;
};

// An ask that two approvers cleared, then ran: the row names each approver
// with the time they took from the approval request, and the cost.
TEST(ComplianceReport, AnAskedCallShowsEachApproverTheirWaitAndTheOutcome) {
  Calls c;
  c.tool = "http_request";
  c.Received("r1", 0);
  c.Decided("r1", 1, "ask", "http_request:POST https://api.example/x",
            {{"approval", {{"quorum", 2}, {"approvers", Json::array()}, {"timeout_s", 900}}}});
  c.Add(ev::kApprovalRequested, "r1", 2, {{"approvers_needed", 2}, {"deadline", "x"}, {"args_hash", "h"}});
  c.Answered("r1", 12, "alice", true, "looks right");
  c.Answered("r1", 32.5, "bob", true, "");
  c.Completed("r1", 40, true, 0.125);

  const auto rows = FoldReport(c.events, {});
  ASSERT_EQ(rows.size(), 1u);
  const ReportRow& r = rows[0];
  EXPECT_EQ(r.time_us, kT0);
  EXPECT_EQ(r.request_id, "r1");
  EXPECT_EQ(r.verdict, "ask");
  EXPECT_EQ(r.rule, "rule-ask");
  EXPECT_EQ(r.policy_version, "pv-7");
  EXPECT_EQ(r.invocation, "http_request:POST https://api.example/x");
  ASSERT_EQ(r.approvals.size(), 2u);
  EXPECT_EQ(r.approvals[0].approver, "alice");
  EXPECT_EQ(r.approvals[0].decision, "granted");
  EXPECT_EQ(r.approvals[0].comment, "looks right");
  EXPECT_EQ(r.approvals[0].wait_us, 10 * kSecond);
  EXPECT_EQ(r.approvals[1].approver, "bob");
  EXPECT_EQ(r.approvals[1].wait_us, 30 * kSecond + kSecond / 2);
  EXPECT_EQ(r.outcome, "completed");
  EXPECT_EQ(r.error_code, "");
  EXPECT_EQ(r.cost_usd, 0.125);
  EXPECT_EQ(r.reserved_usd, 0.25);
  EXPECT_EQ(r.seqs, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7}));

  const auto cells = ReportCells(r, nullptr);
  const auto cols = ReportColumns(false);
  ASSERT_EQ(cells.size(), cols.size());
  const size_t approvers = std::find(cols.begin(), cols.end(), "approvers") - cols.begin();
  EXPECT_EQ(cells[approvers],
            "alice granted after 10.000s [once]: looks right\nbob granted after 30.500s [once]");
}

TEST(ComplianceReport, ADeniedCallIsDeniedWithThePolicysCodeAndNoApprovers) {
  Calls c;
  c.Received("r1", 0);
  c.Decided("r1", 1, "deny", "builtin:echo", {{"error_code", "E_POLICY_DENIED"}});
  const auto rows = FoldReport(c.events, {});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].verdict, "deny");
  EXPECT_EQ(rows[0].outcome, "denied");
  EXPECT_EQ(rows[0].error_code, "E_POLICY_DENIED");
  EXPECT_TRUE(rows[0].approvals.empty());
  EXPECT_FALSE(rows[0].cost_usd.has_value());
}

TEST(ComplianceReport, AnApproversDenialAndAnUnansweredAskAreDeniedAndPending) {
  Calls c;
  c.Received("r1", 0);
  c.Decided("r1", 1, "ask", "builtin:echo");
  c.Add(ev::kApprovalRequested, "r1", 2, {{"approvers_needed", 1}, {"deadline", "x"}, {"args_hash", "h"}});
  c.Answered("r1", 5, "carol", false, "not today");
  c.Received("r2", 10);
  c.Decided("r2", 11, "ask", "builtin:echo");
  c.Add(ev::kApprovalRequested, "r2", 12, {{"approvers_needed", 1}, {"deadline", "x"}, {"args_hash", "h"}});
  const auto rows = FoldReport(c.events, {});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].outcome, "denied");
  EXPECT_EQ(rows[0].error_code, "E_APPROVAL_DENIED");
  ASSERT_EQ(rows[0].approvals.size(), 1u);
  EXPECT_EQ(rows[0].approvals[0].decision, "denied");
  EXPECT_EQ(rows[0].approvals[0].wait_us, 3 * kSecond);
  EXPECT_EQ(rows[1].outcome, "pending");
}

// create_ticket expands to http_request: its call is found under either
// name, and under neither other tool.
TEST(ComplianceReport, AnAliasCallIsFoundUnderItsOwnNameAndTheToolItExpandsTo) {
  Calls c;
  c.tool = "create_ticket";
  c.Received("alias", 0);
  c.Decided("alias", 1, "allow", "http_request:POST https://tracker.example/projects/ops/tickets");
  c.Completed("alias", 2, true, 0);
  c.tool = "echo";
  c.Received("plain", 3);
  c.Decided("plain", 4, "allow", "builtin:echo");
  c.tool = "read_file";
  c.Received("spelt", 5, {{"tool_called", "mcp__kaizen_builtin__read_file"}});
  c.Decided("spelt", 6, "allow", "read_file:/w/a");

  auto requests = [&](const std::string& tool) {
    std::vector<std::string> ids;
    for (const auto& r : FoldReport(c.events, Filter([&](ReportFilter& f) { f.tool = tool; })))
      ids.push_back(r.request_id);
    return ids;
  };
  EXPECT_EQ(requests("http_request"), std::vector<std::string>{"alias"});
  EXPECT_EQ(requests("create_ticket"), std::vector<std::string>{"alias"});
  EXPECT_EQ(requests("echo"), std::vector<std::string>{"plain"});
  EXPECT_EQ(requests("read_file"), std::vector<std::string>{"spelt"});
  EXPECT_EQ(requests("mcp__kaizen_builtin__read_file"), std::vector<std::string>{"spelt"});
  EXPECT_TRUE(requests("write_file").empty());
  const auto rows = FoldReport(c.events, Filter([&](ReportFilter& f) { f.tool = "http_request"; }));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].tool, "create_ticket");
  EXPECT_EQ(rows[0].decided_tool, "http_request");
}

TEST(ComplianceReport, FiltersKeepTheCallsOfTheirAgentSessionVerdictAndTime) {
  Calls c;
  c.Received("r1", 0);
  c.Decided("r1", 1, "allow", "builtin:echo");
  c.agent = "a2";
  c.session = "s2";
  c.Received("r2", 100);
  c.Decided("r2", 101, "deny", "builtin:echo");
  auto ids = [&](const ReportFilter& f) {
    std::vector<std::string> out;
    for (const auto& r : FoldReport(c.events, f)) out.push_back(r.request_id);
    return out;
  };
  EXPECT_EQ(ids(Filter([&](ReportFilter& f) { f.agent_id = "a2"; })), std::vector<std::string>{"r2"});
  EXPECT_EQ(ids(Filter([&](ReportFilter& f) { f.session_id = "s1"; })), std::vector<std::string>{"r1"});
  EXPECT_EQ(ids(Filter([&](ReportFilter& f) { f.verdict = "deny"; })), std::vector<std::string>{"r2"});
  EXPECT_EQ(ids(Filter([&](ReportFilter& f) { f.since_us = kT0 + 50 * kSecond; })),
            std::vector<std::string>{"r2"});
  EXPECT_EQ(ids(Filter([&](ReportFilter& f) { f.until_us = kT0 + 100 * kSecond; })),
            std::vector<std::string>{"r1"});
  EXPECT_EQ(ids({}), (std::vector<std::string>{"r1", "r2"}));
}

// Request ids are the agents' own and per org: the same id in two orgs is
// two calls, and an org filter keeps its own.
TEST(ComplianceReport, TheSameRequestIdInTwoOrgsIsTwoCallsAndAnOrgFilterKeepsItsOwn) {
  Calls c;
  c.Received("same", 0);
  c.Decided("same", 1, "allow", "builtin:echo");
  c.org = "o2";
  c.Received("same", 2);
  c.Decided("same", 3, "deny", "builtin:echo");
  ASSERT_EQ(FoldReport(c.events, {}).size(), 2u);
  const auto o2 = FoldReport(c.events, Filter([&](ReportFilter& f) { f.org_id = "o2"; }));
  ASSERT_EQ(o2.size(), 1u);
  EXPECT_EQ(o2[0].org_id, "o2");
  EXPECT_EQ(o2[0].verdict, "deny");
}

std::unique_ptr<EventLog> LogOf(const std::string& dir, std::vector<Event> events) {
  std::unique_ptr<EventLog> log;
  LogOptions o;
  o.durability = Durability::kBuffered;
  Status s = EventLog::Open(dir, o, &log);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (Event& e : events) {
    e.seq = 0;
    AppendResult r = log->Append(e);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  }
  return log;
}

// Over a real log: a tenant reads its own org whatever it names, and a
// call's completion after `until` still belongs to the call received before.
TEST(ComplianceReport, ATenantReadsOnlyItsOrgAndACallKeepsEventsAfterTheRange) {
  Calls c;
  c.Received("r1", 0);
  c.Decided("r1", 1, "allow", "builtin:echo");
  c.Completed("r1", 500, true, 0.5);
  c.org = "o2";
  c.Received("r2", 2);
  c.Decided("r2", 3, "allow", "builtin:echo");
  TempDir dir;
  auto log = LogOf(dir.path(), c.events);

  std::vector<ReportRow> rows;
  ASSERT_TRUE(ReadReport(log->store(), QueryScope::Tenant("o1"), {}, &rows).ok());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].org_id, "o1");
  EXPECT_EQ(rows[0].outcome, "completed");
  EXPECT_EQ(rows[0].seqs.size(), 4u);

  Status s = ReadReport(log->store(), QueryScope::Tenant("o1"),
                        Filter([&](ReportFilter& f) { f.org_id = "o2"; }), &rows);
  EXPECT_EQ(s.code(), errc::kForbidden);

  ASSERT_TRUE(ReadReport(log->store(), QueryScope::Operator(),
                         Filter([&](ReportFilter& f) { f.until_us = kT0 + 100 * kSecond; }), &rows)
                  .ok());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].request_id, "r1");
  EXPECT_EQ(rows[0].cost_usd, 0.5) << "the completion at +500s is the call's, though after until";
}

// A cell a spreadsheet would run as a formula is text with an apostrophe;
// quotes, commas and line breaks are quoted as RFC 4180 says.
TEST(ComplianceReport, CsvCellsThatWouldBeFormulasAreNeutralisedAndQuoted) {
  EXPECT_EQ(CsvField("=HYPERLINK(\"http://evil\",\"x\")"), "\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\"");
  EXPECT_EQ(CsvField("+1"), "'+1");
  EXPECT_EQ(CsvField("-2+3"), "'-2+3");
  EXPECT_EQ(CsvField("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(CsvField("\tcmd"), "'\tcmd");
  EXPECT_EQ(CsvField("\r=1"), "\"'\r=1\"");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");

  Calls c;
  c.agent = "=cmd|' /C calc'!A0";
  c.Received("r1", 0);
  c.Decided("r1", 1, "ask", "builtin:echo");
  c.Add(ev::kApprovalRequested, "r1", 2, {{"approvers_needed", 1}, {"deadline", "x"}, {"args_hash", "h"}});
  c.Answered("r1", 3, "alice", false, "ok\n=evil");
  std::ostringstream out;
  WriteReportCsv(FoldReport(c.events, {}), nullptr, out);
  const std::string csv = out.str();
  EXPECT_NE(csv.find(",'=cmd|' /C calc'!A0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("alice denied after 1.000s [once]: ok =evil"), std::string::npos)
      << "a comment's line break cannot fake another approver: " << csv;
  EXPECT_EQ(csv.substr(0, csv.find("\r\n")),
            "time,org,agent,session,request_id,tool,invocation,verdict,rule,reason,policy_version,approvers,"
            "outcome,error_code,reserved_usd,cost_usd,seqs");
}

TEST(ComplianceReport, TheTableShowsNoControlOrNonAsciiBytesAndCutsLongCells) {
  Calls c;
  c.agent = "ev\x1b]0;x\x07\xe2\x80\xae";
  c.session = std::string(100, 's');
  c.Received("r1", 0);
  c.Decided("r1", 1, "allow", "builtin:echo");
  std::ostringstream out;
  WriteReportTable(FoldReport(c.events, {}), out);
  const std::string text = out.str();
  for (unsigned char ch : text) EXPECT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7f)) << int(ch);
  EXPECT_NE(text.find("ev?]0;x?? "), std::string::npos) << text;
  EXPECT_EQ(text.find(std::string(13, 's')), std::string::npos) << "the session is cut to its column";
  EXPECT_NE(text.find(std::string(11, 's') + "~"), std::string::npos) << text;
}

TEST(ComplianceReport, JsonLinesCarryEveryFieldAndTheRowsProofs) {
  Calls c;
  c.Received("r1", 0);
  c.Decided("r1", 1, "allow", "builtin:echo");
  const auto rows = FoldReport(c.events, {});
  std::vector<RowProofs> proofs{
      {Json{{"seq", 1}, {"proof", "p1"}}, Json{{"seq", 2}, {"proof_pending", true}}}};
  std::ostringstream out;
  ASSERT_TRUE(WriteReport("jsonl", rows, &proofs, out));
  Json j = Json::parse(out.str());
  EXPECT_EQ(j["request_id"], "r1");
  EXPECT_EQ(j["verdict"], "allow");
  EXPECT_EQ(j["outcome"], "pending");
  EXPECT_EQ(j["seqs"], (Json{1, 2}));
  EXPECT_EQ(j["proofs"][0]["proof"], "p1");
  EXPECT_FALSE(WriteReport("xml", rows, nullptr, out));
}

// --- End to end: `tollgate audit report` over a running pipeline ---

// A loopback upstream that answers every POST.
class Upstream {
 public:
  Upstream() {
    server_.Post(".*", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"ok":true})", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    testing::WaitUntil([this] { return server_.is_running(); }, std::chrono::seconds(5));
  }
  ~Upstream() {
    server_.stop();
    thread_.join();
  }
  std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// Every call asks (mode ask) two named approvers; agent-x has the alias
// create_ticket, a POST to the upstream.
std::string AskTwicePolicy(const Upstream& up) {
  const std::string http =
      "        http_request:\n"
      "          base_url: \"" +
      up.origin() +
      "/api/\"\n"
      "          allowed_methods: [GET, POST]\n"
      "          hosts: [\"127.0.0.1\"]\n";
  return "version: 1\n"
         "mode: ask\n"
         "approvals:\n"
         "  default: {quorum: 2, approvers: [alice, bob], timeout_s: 900}\n"
         "execute:\n"
         "  network: {allow_cidrs: [\"127.0.0.0/8\"], max_redirects: 0}\n"
         "orgs:\n"
         "  org-1:\n"
         "    agents:\n"
         "      agent-x:\n" +
         http +
         "          aliases:\n"
         "            create_ticket:\n"
         "              method: POST\n"
         "              url: \"tickets\"\n"
         "              input_schema: {type: object, properties: {title: {type: string}}}\n"
         "      agent-y:\n" +
         http;
}

class ComplianceReportPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    PipelineOptions o;
    o.data_dir = dir_.sub("data");
    o.durability = Durability::kBuffered;
    o.http_listen = "127.0.0.1:0";
    o.policy_path = dir_.sub("policy.yaml");
    std::ofstream(o.policy_path) << AskTwicePolicy(upstream_);
    o.tokens_file = dir_.sub("tokens.json");
    for (const auto& [name, who] :
         std::vector<std::pair<std::string, Principal>>{{"alice", {"alice", "org-1", {"approver"}}},
                                                        {"bob", {"bob", "org-1", {"approver"}}},
                                                        {"auditor", {"audrey", "org-1", {"auditor"}}}}) {
      ASSERT_TRUE(AddToken(o.tokens_file, who, &tokens_[name]).ok());
    }
    std::ofstream(dir_.sub("auditor.token")) << tokens_["auditor"];
    ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
    data_ = o.data_dir;
    signers_ = std::make_unique<testing::TestSigners>(*p_);
    bus_.brokers = p_->bootstrap();
    ASSERT_TRUE(Producer::Open(bus_, "", &producer_).ok());
  }
  void TearDown() override {
    if (p_) testing::ExpectEveryEventConforms(p_->log().store());
    producer_.reset();
    signers_.reset();
    p_.reset();
  }
  // Publishes a request of org-1 signed by its agent.
  void Send(const std::string& agent, const std::string& rid, const std::string& tool, const Json& args) {
    const Json req{{"request_id", rid},          {"org_id", "org-1"}, {"agent_id", agent},
                   {"session_id", "s-" + agent}, {"tool", tool},      {"args", args}};
    Message m = MessageFor(bus_.topics.requests(), req, req);
    signers_->SignRequest(&m);
    ASSERT_TRUE(producer_->Send(m).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  bool Logged(const std::string& rid, const char* type) {
    AuditQuery q;
    q.org_id = "org-1";
    q.request_id = rid;
    bool found = false;
    EXPECT_TRUE(ForEachEvent(p_->log().store(), q, [&](Event& e) { found |= e.type == type; }).ok());
    return found;
  }
  void WaitLogged(const std::string& rid, const char* type) {
    ASSERT_TRUE(testing::WaitUntil([&] { return Logged(rid, type); }, std::chrono::seconds(30)))
        << rid << " never logged " << type;
  }
  // `approver` answers through the HTTP API, as the console and CLI do.
  void Answer(const std::string& approver, const std::string& rid, const std::string& decision,
              const std::string& comment) {
    httplib::Client c("127.0.0.1", p_->api()->port());
    c.set_read_timeout(20, 0);
    c.set_bearer_token_auth(tokens_[approver]);
    auto r = c.Post("/v1/approvals/" + rid, Json{{"decision", decision}, {"comment", comment}}.dump(),
                    "application/json");
    ASSERT_TRUE(r) << "no answer";
    // 202: submitted, the verdict not logged within the API's wait (a
    // loaded machine); the log shows it later, which the test waits for.
    ASSERT_TRUE(r->status == 200 || r->status == 202) << r->status << " " << r->body;
  }
  // A checkpoint of the tree as it stands (GET /v1/audit/checkpoint?fresh=1).
  void SignCheckpoint() {
    httplib::Client c("127.0.0.1", p_->api()->port());
    c.set_read_timeout(20, 0);
    c.set_bearer_token_auth(tokens_["auditor"]);
    auto r = c.Get("/v1/audit/checkpoint?fresh=1");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  }
  // The rows `tollgate audit report ARGS --format jsonl` prints.
  std::vector<Json> ReportLines(const std::vector<std::string>& args) {
    const std::string path = dir_.sub("report" + std::to_string(++reports_) + ".jsonl");
    std::vector<Json> rows;
    if (Report(args, path) != 0) return rows;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) rows.push_back(Json::parse(line));
    return rows;
  }
  // `tollgate audit report ARGS`, its stdout in a file: the exit code.
  int Report(std::vector<std::string> args, const std::string& out_path) {
    args.insert(args.begin(), {TOLLGATE_BIN, "audit", "report", "--data", data_, "--token-file",
                               dir_.sub("auditor.token")});
    testing::ChildProcess c;
    if (!c.Start(args, out_path, out_path + ".err")) return -1;
    const auto code = c.Wait(std::chrono::seconds(60));
    if (code != 0) ADD_FAILURE() << c.out() << c.err();
    return code.value_or(-1);
  }

  TempDir dir_;
  Upstream upstream_;
  std::string data_;
  std::map<std::string, std::string> tokens_;
  int reports_ = 0;
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<testing::TestSigners> signers_;
  BusConfig bus_;
  std::unique_ptr<Producer> producer_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Python's csv module reads `path`; prints {"header": [...], "rows": [{...}]}.
constexpr const char* kReadCsv =
    "import csv, json, sys\n"
    "with open(sys.argv[1], newline='', encoding='utf-8') as f:\n"
    "    table = list(csv.reader(f, strict=True))\n"
    "print(json.dumps({'header': table[0], 'rows': [dict(zip(table[0], r)) for r in table[1:]]}))\n";

TEST_F(ComplianceReportPipeline, OneCommandListsEveryHttpRequestOfAnAgentAliasesIncludedWithItsApprovers) {
  Send("agent-x", "x-ticket", "create_ticket", {{"title", "disk full"}});
  Send("agent-x", "x-post", "http_request",
       {{"method", "POST"}, {"url", upstream_.origin() + "/api/other"}, {"json", {{"a", 1}}}});
  Send("agent-y", "y-post", "http_request",
       {{"method", "POST"}, {"url", upstream_.origin() + "/api/other"}, {"json", {{"a", 2}}}});
  Send("agent-x", "x-echo", "echo", {{"text", "hi"}});
  for (const char* rid : {"x-ticket", "x-post", "y-post"}) WaitLogged(rid, ev::kApprovalRequested);
  WaitLogged("x-echo", ev::kDecisionMade);
  Answer("alice", "x-ticket", "approve", "ticket is fine");
  Answer("bob", "x-ticket", "approve", "ok, \"quoted\", with commas");
  Answer("alice", "x-post", "approve", "");
  Answer("bob", "x-post", "deny", "not this endpoint");
  Answer("alice", "y-post", "approve", "");
  Answer("bob", "y-post", "approve", "");
  WaitLogged("x-ticket", ev::kExecutionCompleted);
  WaitLogged("x-post", ev::kApprovalDenied);

  const std::string csv = dir_.sub("report.csv");
  ASSERT_EQ(Report({"--agent", "agent-x", "--tool", "http_request", "--format", "csv"}, csv), 0);
  testing::ChildProcess py;
  ASSERT_TRUE(py.Start({"/usr/bin/python3", "-c", kReadCsv, csv}, csv + ".json", csv + ".py.err"));
  ASSERT_EQ(py.Wait(std::chrono::seconds(30)), 0) << py.err();
  const Json parsed = Json::parse(py.out());
  EXPECT_EQ(parsed["header"], Json(ReportColumns(false)));
  const Json& rows = parsed["rows"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2) << "\nagent-y's call and agent-x's echo are not asked for";
  const Json& ticket = rows[0]["request_id"] == "x-ticket" ? rows[0] : rows[1];
  const Json& post = rows[0]["request_id"] == "x-ticket" ? rows[1] : rows[0];
  EXPECT_EQ(ticket["tool"], "create_ticket") << "the alias call is found under the tool it expands to";
  EXPECT_EQ(ticket["invocation"], "http_request:POST " + upstream_.origin() + "/api/tickets");
  EXPECT_EQ(ticket["verdict"], "ask");
  EXPECT_EQ(ticket["outcome"], "completed");
  const std::string approvers = ticket["approvers"];
  EXPECT_NE(approvers.find("alice granted after "), std::string::npos) << approvers;
  EXPECT_NE(approvers.find("s [once]: ticket is fine\nbob granted after "), std::string::npos) << approvers;
  EXPECT_NE(approvers.find("[once]: ok, \"quoted\", with commas"), std::string::npos) << approvers;
  EXPECT_EQ(post["tool"], "http_request");
  EXPECT_EQ(post["outcome"], "denied");
  EXPECT_EQ(post["error_code"], "E_APPROVAL_DENIED");
  const std::string post_approvers = post["approvers"];
  EXPECT_EQ(post_approvers.rfind("alice granted after ", 0), 0u) << post_approvers;
  EXPECT_NE(post_approvers.find("\nbob denied after "), std::string::npos) << post_approvers;
  EXPECT_NE(post_approvers.find(": not this endpoint"), std::string::npos) << post_approvers;
  for (const Json& r : rows) {
    EXPECT_EQ(r["agent"], "agent-x");
    EXPECT_EQ(r["org"], "org-1");
    EXPECT_FALSE(std::string(r["seqs"]).empty());
  }

  // Over HTTP, as the console downloads it: an attachment of type text/csv,
  // of the caller's org only.
  httplib::Client c("127.0.0.1", p_->api()->port());
  c.set_bearer_token_auth(tokens_["auditor"]);
  auto r = c.Get("/v1/audit/report?agent=agent-x&tool=http_request&format=csv");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type").rfind("text/csv", 0), 0u);
  EXPECT_NE(r->get_header_value("Content-Disposition").find("attachment"), std::string::npos);
  EXPECT_EQ(r->body, ReadAll(csv));
  r = c.Get("/v1/audit/report?org=org-2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  c.set_bearer_token_auth(tokens_["alice"]);
  r = c.Get("/v1/audit/report");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << "an approver is no auditor: " << r->body;

  // With no `up` running, the same command reads the log itself.
  testing::ExpectEveryEventConforms(p_->log().store());
  producer_.reset();
  signers_.reset();
  p_.reset();
  const std::string offline = dir_.sub("offline.csv");
  ASSERT_EQ(Report({"--agent", "agent-x", "--tool", "http_request", "--format", "csv"}, offline), 0);
  EXPECT_EQ(ReadAll(offline), ReadAll(csv));
}

TEST_F(ComplianceReportPipeline, AnAliasCallIsReportedUnderItsOwnNameWithTheProofOfEachOfItsEvents) {
  Send("agent-x", "x-ticket", "create_ticket", {{"title", "disk full"}});
  Send("agent-x", "x-echo", "echo", {{"text", "hi"}});
  WaitLogged("x-ticket", ev::kApprovalRequested);
  WaitLogged("x-echo", ev::kDecisionMade);
  Answer("alice", "x-ticket", "approve", "");
  Answer("bob", "x-ticket", "approve", "");
  WaitLogged("x-ticket", ev::kExecutionCompleted);

  // Under the alias's own name: that call alone; and with proofs, once a
  // signed checkpoint covers the call, each of its events' tlog-proof.
  std::vector<Json> alias_rows;
  auto proven = [&] {
    if (alias_rows.size() != 1) return false;
    for (const Json& p : alias_rows[0]["proofs"]) {
      if (!p.contains("proof")) return false;
    }
    return true;
  };
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        SignCheckpoint();
        alias_rows = ReportLines({"--tool", "create_ticket", "--format", "jsonl", "--proofs"});
        return proven();
      },
      std::chrono::seconds(30)))
      << (alias_rows.empty() ? "no row" : alias_rows[0].dump());
  EXPECT_EQ(alias_rows[0]["request_id"], "x-ticket");
  EXPECT_EQ(alias_rows[0]["decided_tool"], "http_request");
  EXPECT_EQ(alias_rows[0]["approvals"].size(), 2u);
  const Json& proofs = alias_rows[0]["proofs"];
  ASSERT_EQ(proofs.size(), alias_rows[0]["seqs"].size());
  for (size_t i = 0; i < proofs.size(); ++i) {
    EXPECT_EQ(proofs[i]["seq"], alias_rows[0]["seqs"][i]);
    EXPECT_EQ(std::string(proofs[i]["proof"]).rfind(std::string(kTlogProofHeader) + "\n", 0), 0u)
        << proofs[i].dump();
  }
}

}  // namespace
}  // namespace tollgate
