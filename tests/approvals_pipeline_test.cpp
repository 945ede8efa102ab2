// Approvals end to end in this process: the embedded broker, every stage, a
// real RocksDB log, the webhook sender and the HTTP API, spoken to with real
// Kafka and HTTP clients over 127.0.0.1 only.
//
// decide does not ask yet (the decide issue), so Ask() stands in for it: it
// appends request.received + decision.made as ingest and decide would and
// publishes decide's Flow to the approve topic. When decide asks by itself,
// Ask() can submit a request its policy asks about instead.
//
// Everyone is authenticated (docs/trust.md): requests are signed by their
// agent's key, approval responses on the topic by the approver's own key
// (tests/agent_keys.h), and the CLI and HTTP API act with bearer tokens.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <thread>

#include "agent_keys.h"
#include "api/tokens.h"
#include "approve_util.h"
#include "audit/approvals.h"
#include "audit/audit_query.h"
#include "core/schema.h"
#include "deploy/pipeline.h"
#include "test_util.h"
#include "tests/child_process.h"
#include "tests/results_reader.h"

namespace tollgate {
namespace {

using testing::AskSpec;
using testing::MakeAsk;
using testing::Response;
using testing::TempDir;

class ApprovalsPipelineTest : public ::testing::Test {
 protected:
  void StartPipeline(bool with_tokens = true) {
    PipelineOptions o;
    o.data_dir = dir_.sub("data");
    o.durability = Durability::kBuffered;
    o.http_listen = "127.0.0.1:0";
    o.webhooks = webhooks_;
    o.clock = [this] { return NowMicros() + clock_skip_us_.load(); };
    if (with_tokens) {
      o.tokens_file = dir_.sub("tokens.json");
      if (tokens_.empty()) MakeTokens(o.tokens_file);
    }
    Status s = Pipeline::Start(o, &p_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    signers_ = std::make_unique<testing::TestSigners>(*p_);
    bus_.brokers = p_->bootstrap();
    ASSERT_TRUE(Producer::Open(bus_, "", &producer_).ok());
    ASSERT_TRUE(testing::ResultsReader::Open(bus_, p_->gate().public_b64url(), "", &results_).ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", p_->api()->port());
    http_->set_read_timeout(20, 0);
  }
  void StopPipeline() {
    http_.reset();
    results_.reset();
    producer_.reset();
    signers_.reset();
    p_.reset();
  }
  void SetUp() override { StartPipeline(); }
  void TearDown() override {
    if (!p_) return;
    // Everything the pipeline wrote conforms to the schemas.
    testing::ExpectEveryEventConforms(p_->log().store());
    for (const auto& [rid, list] : results_by_id_) {
      for (const Json& r : list) {
        Status s = SchemaRegistry::Builtin().Validate("result", r);
        EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << r.dump();
      }
    }
    StopPipeline();
  }

  void MakeTokens(const std::string& path) {
    const std::vector<std::pair<std::string, Principal>> who = {
        {"approver1", {"alice", "org-1", {"approver"}}}, {"bob1", {"bob", "org-1", {"approver"}}},
        {"approver2", {"zed", "org-2", {"approver"}}},   {"auditor1", {"audrey", "org-1", {"auditor"}}},
        {"agent1", {"agent-1", "org-1", {"agent"}}},     {"admin", {"root", "*", {"admin"}}}};
    for (const auto& [name, p] : who) ASSERT_TRUE(AddToken(path, p, &tokens_[name]).ok());
  }

  // Stands in for decide answering `ask` (see the file comment).
  std::string Ask(const AskSpec& spec) {
    auto ask = MakeAsk(spec, NowMicros());
    // Through the pipeline's sink, as decide appends: its listeners see them.
    for (const Event& e : ask.events) {
      Status st = AppendOne(p_->sink(), e);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    Publish(bus_.topics.approve(), ask.flow.request, ask.flow.ToJson());
    EXPECT_TRUE(WaitFor([&] { return Has(spec.request_id, "approval.requested", spec.org); }))
        << "never held";
    return ask.flow.args_hash;
  }
  void Publish(const std::string& topic, const Json& request, const Json& value) {
    ASSERT_TRUE(producer_->Send(MessageFor(topic, request, value)).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  // Publishes `response` signed by its approver's own key (an approver of
  // `org`, registered on first use).
  void Respond(const Json& response, const std::string& agent = "agent-1", const std::string& org = "org-1") {
    Message m = MessageFor(bus_.topics.approval_responses(),
                           {{"request_id", response.value("request_id", "")}, {"agent_id", agent}}, response);
    signers_->SignResponse(&m, org, response.value("approver", ""));
    ASSERT_TRUE(producer_->Send(m).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  // Publishes a tool request signed by the agent it names.
  void PublishRequest(const Json& request) {
    Message m = MessageFor(bus_.topics.requests(), request, request);
    signers_->SignRequest(&m);
    ASSERT_TRUE(producer_->Send(m).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  // The first result for `rid` (results of other requests are kept).
  Json WaitResult(const std::string& rid, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (results_by_id_[rid].empty() && std::chrono::steady_clock::now() < deadline) {
      std::vector<Message> batch;
      results_->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& m : batch) results_by_id_[m.headers[kHeaderRequestId]].push_back(Json::parse(m.value));
    }
    return results_by_id_[rid].empty() ? Json() : results_by_id_[rid].front();
  }
  template <typename F>
  bool WaitFor(F pred, std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    return testing::WaitUntil(pred, timeout);
  }
  // Request ids are per org.
  std::vector<Event> EventsOf(const std::string& rid, const std::string& org = "org-1") {
    std::vector<Event> out;
    StoreLogView view(p_->log().store());
    EXPECT_TRUE(view.EventsOfRequest(org, rid, &out).ok());
    return out;
  }
  std::vector<Event> Typed(const std::string& rid, const std::string& type,
                           const std::string& org = "org-1") {
    std::vector<Event> out;
    for (auto& e : EventsOf(rid, org)) {
      if (e.type == type) out.push_back(e);
    }
    return out;
  }
  bool Has(const std::string& rid, const std::string& type, const std::string& org = "org-1") {
    return !Typed(rid, type, org).empty();
  }

  httplib::Headers Bearer(const std::string& name) { return {{"Authorization", "Bearer " + tokens_[name]}}; }

  TempDir dir_;
  std::vector<std::string> webhooks_;
  // Added to the wall clock in the time the stages see (deadlines pass
  // without waiting).
  std::atomic<int64_t> clock_skip_us_{0};
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<testing::TestSigners> signers_;
  BusConfig bus_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<testing::ResultsReader> results_;
  std::map<std::string, std::vector<Json>> results_by_id_;
  std::unique_ptr<httplib::Client> http_;
};

TEST_F(ApprovalsPipelineTest, AskThenApproveIsExecuted) {
  AskSpec spec;
  spec.request_id = "r-approve";
  const std::string hash = Ask(spec);
  // Held: the decision asked, and nothing runs before a human answers.
  EXPECT_EQ(Typed("r-approve", "decision.made").at(0).data["verdict"], "ask");
  EXPECT_FALSE(Has("r-approve", "execution.started")) << "ran before a human answered";
  EXPECT_TRUE(WaitFor([&] { return p_->approve().pending() == 1u; })) << "not pending";
  Respond(Response("r-approve", "approve", "alice", hash));
  Json result = WaitResult("r-approve");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "completed");
  EXPECT_EQ(result["result"]["data"]["text"], "hi");
  std::vector<std::string> types;
  for (auto& e : EventsOf("r-approve")) types.push_back(e.type);
  EXPECT_EQ(types,
            (std::vector<std::string>{"request.received", "decision.made", "approval.requested",
                                      "approval.granted", "execution.started", "execution.completed"}));
}

TEST_F(ApprovalsPipelineTest, AskThenDenyGetsADeniedResult) {
  AskSpec spec;
  spec.request_id = "r-deny";
  const std::string hash = Ask(spec);
  Respond(Response("r-deny", "deny", "alice", hash));
  Json result = WaitResult("r-deny");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "denied");
  EXPECT_EQ(result["result"]["error"]["code"], "E_APPROVAL_DENIED");
  EXPECT_EQ(result["approval"]["approver"], "alice");
  EXPECT_EQ(result["log_seq"], Typed("r-deny", "approval.denied").at(0).seq);
  EXPECT_FALSE(Has("r-deny", "execution.started"));
}

TEST_F(ApprovalsPipelineTest, AnAskExpiresOnTimeWithNoMessageArriving) {
  AskSpec spec;
  spec.request_id = "r-expire";
  spec.timeout_s = 1;
  Ask(spec);
  Json result = WaitResult("r-expire", std::chrono::seconds(10));
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "expired");
  EXPECT_EQ(result["result"]["error"]["code"], "E_APPROVAL_EXPIRED");
  auto expired = Typed("r-expire", "approval.expired");
  ASSERT_EQ(expired.size(), 1u);
  const auto requested = Typed("r-expire", "approval.requested").at(0);
  int64_t deadline;
  ASSERT_TRUE(ParseTime(requested.data["deadline"].get<std::string>(), &deadline));
  EXPECT_GE(expired[0].time_us, deadline);
  // On time: within a few ticks of the deadline (or of the hold, when the
  // stage's consumer joined its group after the deadline on a busy machine).
  EXPECT_LT(expired[0].time_us - std::max(deadline, requested.time_us), 2'000'000) << "expired late";
  EXPECT_EQ(p_->approve().pending(), 0u);
}

TEST_F(ApprovalsPipelineTest, AQuorumOfTwoNeedsTwoDistinctApprovers) {
  AskSpec spec;
  spec.request_id = "r-quorum";
  spec.quorum = 2;
  const std::string hash = Ask(spec);
  Respond(Response("r-quorum", "approve", "alice", hash));
  Respond(Response("r-quorum", "approve", "alice", hash));
  ASSERT_TRUE(WaitFor([&] { return Has("r-quorum", "approval.refused"); }));
  auto refused = Typed("r-quorum", "approval.refused");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].data["code"], "E_APPROVAL_DUPLICATE");
  EXPECT_EQ(Typed("r-quorum", "approval.granted").size(), 1u);
  // One distinct approver of two: the refusal came after alice's grant, so
  // a quorum met by it would show by now (the approval settled, the call
  // sent to execute).
  EXPECT_EQ(p_->approve().pending(), 1u) << "settled by one approver of two";
  EXPECT_FALSE(Has("r-quorum", "execution.started"));
  Respond(Response("r-quorum", "approve", "bob", hash));
  Json result = WaitResult("r-quorum");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "completed");
  EXPECT_EQ(Typed("r-quorum", "approval.granted").size(), 2u);
}

// A response counts only as the identity its signature proves: an unsigned
// one is refused (and filed under org "unknown", not the request's), one
// whose body names another approver than its signer is refused too.
TEST_F(ApprovalsPipelineTest, AnUnsignedOrForgedResponseCountsForNothing) {
  AskSpec spec;
  spec.request_id = "r-forged";
  spec.approvers = {"alice"};
  const std::string hash = Ask(spec);
  Message unsigned_m =
      MessageFor(bus_.topics.approval_responses(), {{"request_id", "r-forged"}, {"agent_id", "agent-1"}},
                 Response("r-forged", "approve", "alice", hash));
  ASSERT_TRUE(producer_->Send(unsigned_m).ok());
  ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(WaitFor([&] { return Has("r-forged", "approval.refused", "unknown"); }));
  auto unsigned_refused = Typed("r-forged", "approval.refused", "unknown");
  EXPECT_EQ(unsigned_refused[0].data["code"], "E_UNAUTHENTICATED");
  EXPECT_FALSE(unsigned_refused[0].data.contains("approver")) << "no proven approver";
  // Signed by mallory, claiming to be alice.
  Message forged =
      MessageFor(bus_.topics.approval_responses(), {{"request_id", "r-forged"}, {"agent_id", "agent-1"}},
                 Response("r-forged", "approve", "alice", hash));
  signers_->SignResponse(&forged, "org-1", "mallory");
  ASSERT_TRUE(producer_->Send(forged).ok());
  ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(WaitFor([&] { return Has("r-forged", "approval.refused"); }));
  auto refused = Typed("r-forged", "approval.refused");
  EXPECT_EQ(refused[0].data["code"], "E_UNAUTHENTICATED");
  EXPECT_EQ(refused[0].data["approver"], "mallory");
  EXPECT_FALSE(Has("r-forged", "approval.granted"));
  EXPECT_EQ(p_->approve().pending(), 1u) << "still held";
  EXPECT_FALSE(Has("r-forged", "execution.started"));
  Respond(Response("r-forged", "approve", "alice", hash));
  Json result = WaitResult("r-forged");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "completed");
}

TEST_F(ApprovalsPipelineTest, AnArgsHashMismatchIsRefusedAndLogged) {
  AskSpec spec;
  spec.request_id = "r-hash";
  spec.approvers = {"alice"};
  const std::string hash = Ask(spec);
  Respond(Response("r-hash", "approve", "alice", ArgsHash({{"text", "something else"}})));
  Respond(Response("r-hash", "approve", "mallory", hash));
  ASSERT_TRUE(WaitFor([&] { return Typed("r-hash", "approval.refused").size() == 2; }));
  auto refused = Typed("r-hash", "approval.refused");
  EXPECT_EQ(refused[0].data["code"], "E_ARGS_HASH_MISMATCH");
  EXPECT_EQ(refused[1].data["code"], "E_APPROVER_NOT_ENTITLED");
  EXPECT_FALSE(Has("r-hash", "approval.granted"));
  std::vector<PendingApproval> pending;
  ASSERT_TRUE(ListPendingApprovals(p_->log().store(), {}, &pending).ok());
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].request_id, "r-hash");
}

TEST_F(ApprovalsPipelineTest, AllowAlwaysAppendsTheAgentRule) {
  AskSpec spec;
  spec.request_id = "r-always";
  const std::string hash = Ask(spec);
  Respond(Response("r-always", "approve", "alice", hash, "always"));
  Json result = WaitResult("r-always");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "completed");
  auto updated = Typed("r-always", "policy.updated");
  ASSERT_EQ(updated.size(), 1u);
  EXPECT_EQ(updated[0].data["allow"], Json::array({"builtin:echo"}));
  EXPECT_EQ(updated[0].data["tier"], "agent_local");
  EXPECT_EQ(updated[0].data["source"], "approval:r-always");
  EXPECT_EQ(updated[0].agent_id, "agent-1");
  // That the next identical call then passes without asking is decide's
  // fold of this event (the decide issue).
}

// With the real decide stage: the default policy asks before write_file;
// an "always" grant adds the agent-local rule, and decide folds it, so the
// next identical call by that agent runs without asking, while another
// agent is still asked.
TEST_F(ApprovalsPipelineTest, AllowAlwaysLetsTheNextIdenticalCallPassWithoutAsking) {
  auto submit = [&](const std::string& rid, const std::string& agent) {
    Json req{{"request_id", rid},    {"org_id", "org-1"},
             {"agent_id", agent},    {"session_id", "s-always"},
             {"tool", "write_file"}, {"args", {{"path", "notes/today.txt"}, {"content", "hello"}}}};
    PublishRequest(req);
  };
  submit("r-first", "agent-1");
  ASSERT_TRUE(WaitFor([&] { return Has("r-first", "approval.requested"); })) << "decide did not ask";
  const auto asked = Typed("r-first", "decision.made");
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].data["verdict"], "ask");
  const std::string version_before = asked[0].data.value("policy_version", "");
  const std::string hash = Typed("r-first", "approval.requested")[0].data.value("args_hash", "");
  Respond(Response("r-first", "approve", "alice", hash, "always"));
  ASSERT_FALSE(WaitResult("r-first").is_null());
  ASSERT_EQ(Typed("r-first", "policy.updated").size(), 1u);

  submit("r-second", "agent-1");
  ASSERT_FALSE(WaitResult("r-second").is_null());
  const auto second = Typed("r-second", "decision.made");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].data["verdict"], "allow") << second[0].data.dump();
  EXPECT_NE(second[0].data.value("policy_version", ""), version_before)
      << "agent rules are part of the version";
  EXPECT_FALSE(Has("r-second", "approval.requested"));
  EXPECT_TRUE(Has("r-second", "execution.started"));

  submit("r-other-agent", "agent-2");
  ASSERT_TRUE(WaitFor([&] { return Has("r-other-agent", "approval.requested"); }))
      << "the rule is agent-1's alone";

  // The rule pins the path the approver saw: agent-1 writing another file
  // is asked again.
  const std::string subject = asked[0].data.value("subject", "");
  EXPECT_EQ(subject.rfind("write_file:", 0), 0u) << asked[0].data.dump();
  EXPECT_NE(subject.find("notes/today.txt"), std::string::npos) << subject;
  EXPECT_EQ(Typed("r-first", "policy.updated")[0].data["allow"], Json::array({subject}));
  auto other =
      Json{{"request_id", "r-other-file"}, {"org_id", "org-1"},
           {"agent_id", "agent-1"},        {"session_id", "s-always"},
           {"tool", "write_file"},         {"args", {{"path", "notes/other.txt"}, {"content", "hello"}}}};
  PublishRequest(other);
  ASSERT_TRUE(WaitFor([&] { return Has("r-other-file", "approval.requested"); }))
      << "an always for notes/today.txt allowed another file";
}

TEST_F(ApprovalsPipelineTest, ARestartKeepsPendingApprovalsAndTheirDeadlines) {
  AskSpec keep;
  keep.request_id = "r-keep";
  keep.timeout_s = 3600;
  const std::string hash = Ask(keep);
  AskSpec lapse;
  lapse.request_id = "r-lapse";
  lapse.timeout_s = 2;
  Ask(lapse);
  const std::string deadline = Typed("r-keep", "approval.requested").at(0).data["deadline"];
  StopPipeline();
  // r-lapse's deadline (2 s away) passes while down: the stages' clock jumps.
  clock_skip_us_ += 3'000'000;
  StartPipeline();
  std::vector<PendingApproval> pending;
  ASSERT_TRUE(WaitFor([&] { return Has("r-lapse", "approval.expired"); })) << "expired at start, on time";
  // The record is readable before its append is acknowledged (sync
  // durability), and the stage drops the expired one from its pending set
  // after that ack: wait for it rather than race it.
  EXPECT_TRUE(WaitFor([&] { return p_->approve().pending() == 1u; })) << p_->approve().pending();
  int64_t want;
  ASSERT_TRUE(ParseTime(deadline, &want));
  EXPECT_EQ(p_->approve().next_deadline_us(), want) << "the deadline survives the restart";
  ASSERT_TRUE(ListPendingApprovals(p_->log().store(), {}, &pending).ok());
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(FormatTime(pending[0].deadline_us), deadline);
  EXPECT_EQ(Typed("r-keep", "approval.requested").size(), 1u) << "not re-asked";
  Respond(Response("r-keep", "approve", "alice", hash));
  Json result = WaitResult("r-keep");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "completed");
}

TEST_F(ApprovalsPipelineTest, AWebhookIsDeliveredWithRetries) {
  StopPipeline();
  httplib::Server hook;
  std::atomic<int> calls{0};
  std::mutex mu;
  std::vector<Json> bodies;
  hook.Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    if (++calls <= 2) {
      res.status = 503;  // fails twice, then accepts
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    bodies.push_back(Json::parse(req.body));
    res.status = 204;
  });
  const int port = hook.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread server([&] { hook.listen_after_bind(); });
  webhooks_ = {"http://127.0.0.1:" + std::to_string(port) + "/hook"};
  StartPipeline();
  AskSpec spec;
  spec.request_id = "r-hook";
  spec.quorum = 2;
  Ask(spec);
  EXPECT_TRUE(WaitFor([&] { return p_->webhooks()->poster().delivered.load() == 1; }));
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(p_->webhooks()->poster().attempts.load(), 3u);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(bodies.size(), 1u);
    EXPECT_EQ(bodies[0]["event"], "approval.requested");
    EXPECT_EQ(bodies[0]["request_id"], "r-hook");
    EXPECT_EQ(bodies[0]["approvers_needed"], 2);
    EXPECT_EQ(bodies[0]["org_id"], "org-1");
  }
  StopPipeline();
  hook.stop();
  server.join();
}

TEST_F(ApprovalsPipelineTest, AnExecutionWhoseDecisionAsksToNotifyIsReported) {
  StopPipeline();
  httplib::Server hook;
  std::mutex mu;
  std::vector<Json> bodies;
  hook.Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    bodies.push_back(Json::parse(req.body));
    res.status = 200;
  });
  const int port = hook.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread server([&] { hook.listen_after_bind(); });
  webhooks_ = {"http://127.0.0.1:" + std::to_string(port) + "/hook"};
  StartPipeline();
  AskSpec loud;
  loud.request_id = "r-loud";
  loud.notify = true;
  AskSpec quiet;
  quiet.request_id = "r-quiet";
  const std::string h1 = Ask(loud);
  const std::string h2 = Ask(quiet);
  Respond(Response("r-loud", "approve", "alice", h1));
  Respond(Response("r-quiet", "approve", "alice", h2));
  ASSERT_FALSE(WaitResult("r-loud").is_null());
  ASSERT_FALSE(WaitResult("r-quiet").is_null());
  EXPECT_TRUE(WaitFor([&] { return p_->webhooks()->poster().delivered.load() == 3; }));
  // r-quiet's execution.completed reached the observer before its result
  // was published (listeners run inside the append); the poster sends in
  // order, so once a later notice (r-marker's approval.requested) has
  // arrived, any notice for r-quiet would have arrived before it.
  AskSpec marker;
  marker.request_id = "r-marker";
  Ask(marker);
  auto is_marker = [](const Json& b) { return b.value("request_id", "") == "r-marker"; };
  EXPECT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::any_of(bodies.begin(), bodies.end(), is_marker);
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    bodies.erase(std::remove_if(bodies.begin(), bodies.end(), is_marker), bodies.end());
    std::vector<std::string> completed;
    for (const auto& b : bodies) {
      if (b["event"] == "execution.completed") completed.push_back(b["request_id"]);
    }
    EXPECT_EQ(bodies.size(), 3u) << "two approval.requested, one execution.completed";
    EXPECT_EQ(completed, std::vector<std::string>{"r-loud"});
  }
  EXPECT_EQ(p_->webhooks()->history_reads(), 0u)
      << "each execution.completed is matched with the decision the listener saw, not read from the log";
  StopPipeline();
  hook.stop();
  server.join();
}

// `tollgate approvals ...` as a separate process against the running pipeline.
using CliRun = testing::CommandResult;
// `env`: "NAME=value" assignments for the command, or "".
CliRun Tollgate(const std::string& args, const std::string& env = "") {
  return testing::RunCommand(env + (env.empty() ? "" : " ") + std::string(TOLLGATE_BIN) + " " + args +
                             " 2>/dev/null");
}

// The CLI approves as the identity of a token (--token-file, or
// $TOLLGATE_TOKEN), through the running pipeline's HTTP API; --as, which
// named an approver nobody had authenticated, is refused.
TEST_F(ApprovalsPipelineTest, TheCliListsApprovesAndReportsRefusals) {
  const std::string data = dir_.sub("data");
  auto token_file = [&](const std::string& name) {
    const std::string path = dir_.sub(name + ".token");
    std::ofstream(path) << tokens_[name] << "\n";
    return path;
  };
  AskSpec a;
  a.request_id = "r-cli";
  a.approvers = {"alice"};
  Ask(a);
  AskSpec b;
  b.request_id = "r-cli-other";
  b.agent = "agent-9";
  Ask(b);
  CliRun list = Tollgate("approvals list --data " + data + " --agent agent-1");
  ASSERT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("\"request_id\":\"r-cli\""), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("r-cli-other"), std::string::npos) << "filtered by agent";
  // --as is a usage error (exit 2), even with a valid token: nothing is
  // published, nothing is recorded.
  const std::string alice = token_file("approver1");
  CliRun as = Tollgate("approvals approve r-cli --as alice --token-file " + alice + " --data " + data);
  EXPECT_EQ(as.exit_code, 2) << as.out;
  CliRun as_mallory = Tollgate("approvals approve r-cli --as mallory --data " + data);
  EXPECT_EQ(as_mallory.exit_code, 2) << as_mallory.out;
  // A token added live (`tokens add`, by the deployment admin) is in force
  // at once: mallory is an approver of org-1, but not one r-cli may have.
  CliRun added = Tollgate("tokens add --data " + data + " --token-file " + token_file("admin") +
                          " --identity mallory --org org-1 --role approver");
  ASSERT_EQ(added.exit_code, 0) << added.out;
  while (!added.out.empty() && added.out.back() == '\n') added.out.pop_back();
  ASSERT_FALSE(added.out.empty());
  tokens_["mallory"] = added.out;
  CliRun refused =
      Tollgate("approvals approve r-cli --token-file " + token_file("mallory") + " --data " + data);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.out.find("E_APPROVER_NOT_ENTITLED"), std::string::npos) << refused.out;
  // The --as attempts recorded nothing: mallory's answer, which went the
  // same way after them, is the only one the stage recorded for r-cli.
  ASSERT_TRUE(WaitFor([&] { return Has("r-cli", "approval.refused"); }));
  EXPECT_FALSE(Has("r-cli", "approval.granted"));
  const auto refusals = Typed("r-cli", "approval.refused");
  ASSERT_EQ(refusals.size(), 1u) << "only mallory's";
  EXPECT_EQ(refusals[0].data.value("approver", ""), "mallory") << refusals[0].data.dump();
  CliRun unknown = Tollgate("approvals deny r-nope --token-file " + alice + " --data " + data);
  EXPECT_EQ(unknown.exit_code, 1);
  CliRun ok = Tollgate("approvals approve r-cli --token-file " + alice + " --comment lgtm --data " + data);
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(Json::parse(ok.out)["outcome"], "granted");
  EXPECT_EQ(Json::parse(ok.out)["event"]["data"]["approver"], "alice") << "the token's identity";
  Json result = WaitResult("r-cli");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "completed");
  // The token from the environment.
  CliRun deny =
      Tollgate("approvals deny r-cli-other --comment no --data " + data, "TOLLGATE_TOKEN=" + tokens_["bob1"]);
  ASSERT_EQ(deny.exit_code, 0) << deny.out;
  EXPECT_EQ(Json::parse(deny.out)["outcome"], "denied");
  EXPECT_EQ(Json::parse(deny.out)["event"]["data"]["approver"], "bob");
  EXPECT_EQ(WaitResult("r-cli-other")["result"]["error"]["code"], "E_APPROVAL_DENIED");
}

// ------------------------------------------------------------- HTTP API

// An "always" rule is listed with who granted it; an admin revokes it (a
// logged policy.updated) and the next identical call asks again.
TEST_F(ApprovalsPipelineTest, AnAllowAlwaysRuleIsListedAndARevocationMakesTheNextCallAskAgain) {
  auto submit = [&](const std::string& rid) {
    PublishRequest({{"request_id", rid},
                    {"org_id", "org-1"},
                    {"agent_id", "agent-1"},
                    {"session_id", "s-rev"},
                    {"tool", "write_file"},
                    {"args", {{"path", "rev.txt"}, {"content", "x"}}}});
  };
  submit("r-grant");
  ASSERT_TRUE(WaitFor([&] { return Has("r-grant", "approval.requested"); }));
  const std::string hash = Typed("r-grant", "approval.requested")[0].data.value("args_hash", "");
  Respond(Response("r-grant", "approve", "alice", hash, "always"));
  ASSERT_FALSE(WaitResult("r-grant").is_null());
  const std::string pattern = Typed("r-grant", "policy.updated")[0].data["allow"][0];

  auto listed = http_->Get("/v1/rules?agent=agent-1", Bearer("auditor1"));
  ASSERT_EQ(listed->status, 200) << listed->body;
  Json rules = Json::parse(listed->body)["rules"];
  ASSERT_EQ(rules.size(), 1u) << rules.dump();
  EXPECT_EQ(rules[0]["pattern"], pattern);
  EXPECT_EQ(rules[0]["granted_by"], "alice");
  EXPECT_EQ(rules[0]["source"], "approval:r-grant");
  EXPECT_EQ(Json::parse(http_->Get("/v1/rules", Bearer("approver2"))->body)["rules"].size(), 0u)
      << "org-2 sees none";

  const Json revoke{
      {"org_id", "org-1"}, {"agent_id", "agent-1"}, {"pattern", pattern}, {"comment", "too broad"}};
  EXPECT_EQ(http_->Post("/v1/rules/revoke", Bearer("approver1"), revoke.dump(), "application/json")->status,
            403);
  Json wrong = revoke;
  wrong["pattern"] = "write_file:*";
  EXPECT_EQ(http_->Post("/v1/rules/revoke", Bearer("admin"), wrong.dump(), "application/json")->status, 404);
  // The CLI: `rules list` reads the log; `rules revoke` asks the API.
  const std::string data = dir_.sub("data");
  CliRun cli_list = Tollgate("rules list --data " + data + " --agent agent-1");
  ASSERT_EQ(cli_list.exit_code, 0);
  EXPECT_EQ(Json::parse(cli_list.out)["pattern"], pattern) << cli_list.out;
  const std::string admin_token = dir_.sub("admin-rules.token");
  std::ofstream(admin_token) << tokens_["admin"] << "\n";
  CliRun done =
      Tollgate("rules revoke '" + pattern + "' --org org-1 --agent agent-1 --comment 'too broad' --data " +
               data + " --token-file " + admin_token);
  ASSERT_EQ(done.exit_code, 0) << done.out;
  Event revoked;
  ASSERT_TRUE(p_->log().store().ReadEvent(Json::parse(done.out)["seq"].get<uint64_t>(), &revoked).ok());
  EXPECT_EQ(revoked.type, "policy.updated");
  EXPECT_EQ(revoked.data["revoke"], Json::array({pattern}));
  EXPECT_EQ(revoked.data["revoked_by"], "root");
  EXPECT_EQ(revoked.data["comment"], "too broad");
  EXPECT_EQ(Tollgate("rules revoke '" + pattern + "' --org org-1 --agent agent-1 --data " + data +
                     " --token-file " + admin_token)
                .exit_code,
            1)
      << "no longer in force";
  EXPECT_EQ(Json::parse(http_->Get("/v1/rules?agent=agent-1", Bearer("auditor1"))->body)["rules"].size(), 0u);

  submit("r-after");
  ASSERT_TRUE(WaitFor([&] { return Has("r-after", "approval.requested"); }))
      << "the revoked rule still allowed it";
}

TEST_F(ApprovalsPipelineTest, HttpRefusesWithoutAValidTokenOrRole) {
  auto health = http_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << "health needs no token";
  for (const char* path : {"/v1/approvals", "/v1/audit"}) {
    auto none = http_->Get(path);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path;
    EXPECT_EQ(Json::parse(none->body)["error"]["code"], "E_UNAUTHORIZED");
    auto wrong = http_->Get(path, {{"Authorization", "Bearer " + std::string(64, '0')}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401) << path;
    auto basic = http_->Get(path, {{"Authorization", "Basic " + tokens_["admin"]}});
    ASSERT_TRUE(basic);
    EXPECT_EQ(basic->status, 401) << path;
  }
  auto post = http_->Post("/v1/approvals/x", "{\"decision\":\"approve\"}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
  // Wrong roles.
  EXPECT_EQ(http_->Get("/v1/approvals", Bearer("auditor1"))->status, 403);
  EXPECT_EQ(http_->Get("/v1/approvals", Bearer("agent1"))->status, 403);
  EXPECT_EQ(http_->Get("/v1/audit", Bearer("approver1"))->status, 403);
  // An agent's token reads the audit log, its own entries only (as the
  // get_audit_log tool): naming another agent is 403.
  EXPECT_EQ(http_->Get("/v1/audit", Bearer("agent1"))->status, 200);
  EXPECT_EQ(http_->Get("/v1/audit?agent=agent-2", Bearer("agent1"))->status, 403);
  EXPECT_EQ(
      http_->Post("/v1/approvals/x", Bearer("auditor1"), "{\"decision\":\"approve\"}", "application/json")
          ->status,
      403);
}

TEST_F(ApprovalsPipelineTest, HttpApproversSeeAndSettleTheirOrgOnly) {
  AskSpec mine;
  mine.request_id = "r-org1";
  const std::string hash = Ask(mine);
  AskSpec theirs;
  theirs.request_id = "r-org2";
  theirs.org = "org-2";
  theirs.agent = "agent-2";
  Ask(theirs);

  auto list = http_->Get("/v1/approvals", Bearer("approver1"));
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  Json l = Json::parse(list->body)["approvals"];
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["request_id"], "r-org1");
  EXPECT_EQ(l[0]["args_hash"], hash);
  EXPECT_EQ(l[0]["you_may_approve"], true);
  EXPECT_EQ(http_->Get("/v1/approvals?org=org-2", Bearer("approver1"))->status, 403) << "cross-org read";
  Json all = Json::parse(http_->Get("/v1/approvals", Bearer("admin"))->body)["approvals"];
  EXPECT_EQ(all.size(), 2u) << "admin sees every org";
  Json filtered =
      Json::parse(http_->Get("/v1/approvals?org=org-2&agent=agent-2", Bearer("admin"))->body)["approvals"];
  ASSERT_EQ(filtered.size(), 1u);
  EXPECT_EQ(filtered[0]["request_id"], "r-org2");

  // Cross-org approval: as if it did not exist; nothing is published.
  auto cross = http_->Post("/v1/approvals/r-org2", Bearer("approver1"), "{\"decision\":\"approve\"}",
                           "application/json");
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 404);
  auto unknown = http_->Post("/v1/approvals/r-none", Bearer("approver1"), "{\"decision\":\"approve\"}",
                             "application/json");
  EXPECT_EQ(unknown->status, 404);
  auto malformed = http_->Post("/v1/approvals/r-org1", Bearer("approver1"), "{\"decision\":\"perhaps\"}",
                               "application/json");
  EXPECT_EQ(malformed->status, 400);
  auto wrong_type =
      http_->Post("/v1/approvals/r-org1", Bearer("approver1"), "{\"decision\":7}", "application/json");
  EXPECT_EQ(wrong_type->status, 400) << wrong_type->body;
  EXPECT_EQ(http_->Post("/v1/approvals/r-org1", Bearer("approver1"), "not json", "application/json")->status,
            400);
  // A deployment-wide caller names the request's org (request ids are per
  // org); without it, nothing is published.
  auto no_org =
      http_->Post("/v1/approvals/r-org2", Bearer("admin"), "{\"decision\":\"approve\"}", "application/json");
  ASSERT_TRUE(no_org);
  EXPECT_EQ(no_org->status, 400) << no_org->body;
  EXPECT_EQ(Json::parse(no_org->body)["error"]["code"], "E_INVALID_QUERY");
  // An org's admin administers that org alone: another org's approvals are
  // as invisible to it as to the org's approvers.
  auto added = http_->Post(
      "/v1/credentials", Bearer("admin"),
      Json{{"kind", "token"}, {"identity", "olga"}, {"org_id", "org-1"}, {"roles", {"admin"}}}.dump(),
      "application/json");
  ASSERT_TRUE(added);
  ASSERT_EQ(added->status, 201) << added->body;
  tokens_["orgadmin1"] = Json::parse(added->body)["token"];
  EXPECT_EQ(http_->Get("/v1/approvals?org=org-2", Bearer("orgadmin1"))->status, 403)
      << "an org admin reading another org";
  Json olga_sees = Json::parse(http_->Get("/v1/approvals", Bearer("orgadmin1"))->body)["approvals"];
  ASSERT_EQ(olga_sees.size(), 1u);
  EXPECT_EQ(olga_sees[0]["request_id"], "r-org1");
  auto olga_cross = http_->Post("/v1/approvals/r-org2?org=org-2", Bearer("orgadmin1"),
                                "{\"decision\":\"approve\"}", "application/json");
  ASSERT_TRUE(olga_cross);
  EXPECT_EQ(olga_cross->status, 404) << "an org admin settling another org's approval: " << olga_cross->body;

  // A wrong args hash reaches the stage, which refuses and logs it.
  Json wrong_hash{{"decision", "approve"}, {"args_hash", std::string(64, 'b')}};
  auto refused =
      http_->Post("/v1/approvals/r-org1", Bearer("approver1"), wrong_hash.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 409) << refused->body;
  EXPECT_EQ(Json::parse(refused->body)["error"]["code"], "E_ARGS_HASH_MISMATCH");
  EXPECT_TRUE(Has("r-org1", "approval.refused"));

  auto ok = http_->Post("/v1/approvals/r-org1", Bearer("approver1"),
                        "{\"decision\":\"approve\",\"comment\":\"fine\"}", "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  Json body = Json::parse(ok->body);
  EXPECT_EQ(body["outcome"], "granted");
  EXPECT_EQ(body["event"]["data"]["approver"], "alice") << "the approver is the token's identity";
  EXPECT_EQ(body["settled"], "approval.granted");
  Json result = WaitResult("r-org1");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["status"], "completed");
  // Settled: a second answer is refused by the stage.
  auto again =
      http_->Post("/v1/approvals/r-org1", Bearer("bob1"), "{\"decision\":\"deny\"}", "application/json");
  EXPECT_EQ(again->status, 409);
  EXPECT_EQ(Json::parse(again->body)["error"]["code"], "E_APPROVAL_SETTLED");
  // The other org's approver settles its own.
  auto deny =
      http_->Post("/v1/approvals/r-org2", Bearer("approver2"), "{\"decision\":\"deny\"}", "application/json");
  ASSERT_EQ(deny->status, 200) << deny->body;
  EXPECT_EQ(Json::parse(deny->body)["outcome"], "denied");
  // The cross-org answers above published nothing: approver2's denial,
  // which went the same way after them, is all the stage recorded.
  ASSERT_TRUE(WaitFor([&] { return Has("r-org2", "approval.denied", "org-2"); }));
  EXPECT_FALSE(Has("r-org2", "approval.granted", "org-2"));
  EXPECT_FALSE(Has("r-org2", "approval.refused", "org-2"));
}

TEST_F(ApprovalsPipelineTest, HttpAuditIsScopedToTheAuditorsOrg) {
  AskSpec a;
  a.request_id = "r-a1";
  Ask(a);
  AskSpec b;
  b.request_id = "r-b1";
  b.org = "org-2";
  b.agent = "agent-2";
  Ask(b);
  auto mine = http_->Get("/v1/audit", Bearer("auditor1"));
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->status, 200) << mine->body;
  Json events = Json::parse(mine->body)["events"];
  // received, decided, approval requested; and the credential.added events
  // of the org's four tokens (imported from tokens.json), which hold their
  // hashes, never the tokens.
  size_t request_events = 0, credential_events = 0;
  for (const auto& e : events) {
    EXPECT_EQ(e["org_id"], "org-1");
    (e.value("session_id", "") == kCredentialsSession ? credential_events : request_events) += 1;
  }
  EXPECT_EQ(request_events, 3u) << mine->body;
  EXPECT_EQ(credential_events, 4u) << mine->body;
  for (const auto& [name, token] : tokens_) EXPECT_EQ(mine->body.find(token), std::string::npos) << name;
  EXPECT_EQ(http_->Get("/v1/audit?org=org-2", Bearer("auditor1"))->status, 403) << "cross-org read";
  auto admin = http_->Get("/v1/audit?org=org-2&type=approval.requested", Bearer("admin"));
  ASSERT_EQ(admin->status, 200);
  Json theirs = Json::parse(admin->body)["events"];
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(theirs[0]["request_id"], "r-b1");
  // Paginated like `tollgate audit query` (over the request's session).
  auto page1 = Json::parse(http_->Get("/v1/audit?session=sess-1&limit=2", Bearer("auditor1"))->body);
  ASSERT_EQ(page1["events"].size(), 2u);
  ASSERT_FALSE(page1["next_cursor"].get<std::string>().empty());
  auto page2 =
      Json::parse(http_
                      ->Get("/v1/audit?session=sess-1&limit=2&cursor=" +
                                httplib::detail::encode_query_param(page1["next_cursor"].get<std::string>()),
                            Bearer("auditor1"))
                      ->body);
  ASSERT_EQ(page2["events"].size(), 1u);
  EXPECT_GT(page2["events"][0]["seq"], page1["events"][1]["seq"]);
  EXPECT_EQ(http_->Get("/v1/audit?limit=5000", Bearer("auditor1"))->status, 400);
}

TEST_F(ApprovalsPipelineTest, FirstStartCreatesAnAdminToken) {
  StopPipeline();
  TempDir fresh;
  PipelineOptions o;
  o.data_dir = fresh.sub("data");
  o.durability = Durability::kBuffered;
  o.http_listen = "127.0.0.1:0";
  ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
  EXPECT_TRUE(p_->admin_token_created());
  struct stat st;
  ASSERT_EQ(stat((o.data_dir + "/admin.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(o.data_dir + "/admin.token");
  std::string token;
  in >> token;
  std::ifstream tokens(o.data_dir + "/tokens.json");
  std::string text((std::istreambuf_iterator<char>(tokens)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find(token), std::string::npos) << "only the hash is stored";
  Json ep;
  ASSERT_TRUE(ReadEndpoints(o.data_dir, &ep).ok());
  EXPECT_EQ(ep["http"], p_->api()->url());
  httplib::Client c("127.0.0.1", p_->api()->port());
  auto r = c.Get("/v1/approvals", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  p_.reset();
  ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
  EXPECT_FALSE(p_->admin_token_created()) << "only on first start";
  p_.reset();
}

TEST(Tokens, StoreHashesAndRefuseMalformedFiles) {
  TempDir dir;
  const std::string path = dir.sub("tokens.json");
  std::string token;
  ASSERT_TRUE(AddToken(path, {"alice", "acme", {"approver", "auditor"}}, &token).ok());
  TokenStore store;
  ASSERT_TRUE(TokenStore::Load(path, &store).ok());
  Principal who;
  ASSERT_TRUE(store.Authenticate(token, &who));
  EXPECT_EQ(who.identity, "alice");
  EXPECT_TRUE(who.Has("auditor"));
  EXPECT_FALSE(who.admin());
  EXPECT_FALSE(who.InOrg("other"));
  // Only a deployment-wide principal spans orgs; an org's admin does not.
  EXPECT_TRUE((Principal{"boss", "acme", {"admin"}}).InOrg("acme"));
  EXPECT_FALSE((Principal{"boss", "acme", {"admin"}}).InOrg("other")) << "an org admin acting in another org";
  EXPECT_TRUE((Principal{"root", "*", {"admin"}}).InOrg("other"));
  EXPECT_FALSE(store.Authenticate(token + "x", &who));
  EXPECT_FALSE(store.Authenticate("", &who));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto write = [&](const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
    return TokenStore::Load(path, &store);
  };
  const std::string hash(64, 'a');
  EXPECT_FALSE(write("{\"tokens\":[{\"token_sha256\":\"" + hash +
                     "\",\"identity\":\"a\",\"org_id\":\"o\",\"roles\":[\"root\"]}]}")
                   .ok());
  EXPECT_FALSE(write("{\"tokens\":[{\"token_sha256\":\"" + hash +
                     "\",\"identity\":\"a\",\"org_id\":\"*\",\"roles\":[\"approver\"]}]}")
                   .ok())
      << "every org is for admins only";
  EXPECT_FALSE(
      write("{\"tokens\":[{\"token_sha256\":\"short\",\"identity\":\"a\",\"org_id\":\"o\",\"roles\":[]}]}")
          .ok());
  EXPECT_FALSE(
      write("{\"tokens\":[{\"token_sha256\":7,\"identity\":\"a\",\"org_id\":\"o\",\"roles\":[]}]}").ok());
  EXPECT_EQ(TokenStore::Load(dir.sub("none.json"), &store).code(), errc::kNotFound);
}

}  // namespace
}  // namespace tollgate
