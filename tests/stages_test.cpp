// The stage cores as pure functions: a message, a context and a log view in,
// events and outputs out. No Kafka, no RocksDB.
#include <gtest/gtest.h>

#include "cli/reconciler.h"
#include "core/redact.h"
#include "core/request_state.h"
#include "decide/decide_stage.h"
#include "execute/execute_stage.h"
#include "ingest/ingest_stage.h"

namespace tollgate {
namespace {

// The log as a vector; seqs assigned as events are "appended".
class VectorLog : public LogView {
 public:
  Status EventsOfRequest(const std::string& rid, std::vector<Event>* out) const override {
    out->clear();
    for (const auto& e : events_) {
      if (e.request_id == rid) out->push_back(e);
    }
    return Status::Ok();
  }
  void Append(const StageResult& r) {
    for (Event e : r.events) {
      bool dup = false;
      for (auto& have : events_) dup |= have.id == e.id;
      if (dup) continue;
      e.seq = events_.size() + 1;
      events_.push_back(e);
    }
  }
  std::vector<Event> events_;
};

Message Msg(const Json& j, const std::string& key = "agent-1") {
  Message m;
  m.topic = "tollgate.requests";
  m.key = key;
  m.value = j.dump();
  return m;
}

Json Req(const std::string& rid = "r1") {
  return {{"request_id", rid}, {"org_id", "o"}, {"agent_id", "agent-1"}, {"session_id", "s"},
          {"tool", "echo"},     {"args", {{"text", "hi"}, {"api_key", "k-123"}}}};
}

class IngestTest : public ::testing::Test {
 protected:
  StageContext Ctx(int offset) { return {1'790'000'000'000'000 + offset, "inc/tollgate.requests/0/" + std::to_string(offset)}; }
  IngestStage ingest_{IngestConfig{}};
  VectorLog log_;
};

TEST_F(IngestTest, AValidRequestIsLoggedRedactedAndForwardedIntact) {
  StageResult r = ingest_.Process(Msg(Req()), Ctx(1), log_);
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = r.events[0];
  EXPECT_EQ(e.type, "request.received");
  EXPECT_EQ(e.data["request"]["args"]["api_key"], "[REDACTED]");
  EXPECT_EQ(e.data["redacted"], Json::array({"/args/api_key"}));
  EXPECT_EQ(e.data["received_at"], FormatTime(Ctx(1).now_us));
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, "tollgate.decide");
  EXPECT_EQ(r.outputs[0].message.key, "agent-1");
  EXPECT_EQ(r.outputs[0].message.headers.at("request_id"), "r1");
  Json flow = Json::parse(r.outputs[0].message.value);
  EXPECT_EQ(flow["request"]["args"]["api_key"], "k-123") << "the executor still gets the secret";
  EXPECT_EQ(flow["args_hash"], e.data["args_hash"]);
}

TEST_F(IngestTest, ReplayRetryAndConflictAreToldApart) {
  StageResult first = ingest_.Process(Msg(Req()), Ctx(1), log_);
  log_.Append(first);
  // The same Kafka message again (a crash before commit): the same output.
  StageResult replay = ingest_.Process(Msg(Req()), Ctx(1), log_);
  EXPECT_TRUE(replay.events.empty());
  ASSERT_EQ(replay.outputs.size(), 1u);
  EXPECT_EQ(replay.outputs[0].message.value, first.outputs[0].message.value);
  // The agent retries while in flight: nothing new.
  StageResult retry = ingest_.Process(Msg(Req()), Ctx(2), log_);
  EXPECT_TRUE(retry.events.empty());
  EXPECT_TRUE(retry.outputs.empty());
  // Same id, other content: refused, without ending the original.
  Json other = Req();
  other["args"]["text"] = "bye";
  StageResult conflict = ingest_.Process(Msg(other), Ctx(3), log_);
  ASSERT_EQ(conflict.events.size(), 1u);
  EXPECT_EQ(conflict.events[0].data["error"]["code"], "E_DUPLICATE_REQUEST");
  log_.Append(conflict);
  std::vector<Event> history;
  log_.EventsOfRequest("r1", &history);
  EXPECT_FALSE(Summarize(history).terminal());
  // Once finished, a retry gets the recorded outcome.
  Event done = history[0];
  done.type = "decision.made";
  done.id = MakeEventId(done.type, "r1");
  done.data = {{"verdict", "deny"}, {"reason", "no"}, {"error_code", "E_POLICY_DENIED"}};
  log_.events_.push_back(done);
  log_.events_.back().seq = log_.events_.size();
  StageResult later = ingest_.Process(Msg(Req()), Ctx(4), log_);
  ASSERT_EQ(later.outputs.size(), 1u);
  Json result = Json::parse(later.outputs[0].message.value);
  EXPECT_EQ(result["status"], "denied");
  EXPECT_EQ(result["log_seq"], log_.events_.size());
}

TEST_F(IngestTest, RejectionsCarryCodesAndDeterministicIds) {
  IngestConfig small;
  small.max_request_bytes = 100;
  IngestStage tight(small);
  StageResult big = tight.Process(Msg(Req()), Ctx(1), log_);
  ASSERT_EQ(big.events.size(), 1u);
  EXPECT_EQ(big.events[0].data["error"]["code"], "E_REQUEST_TOO_LARGE");
  // The derived id depends only on where the message came from.
  StageResult again = tight.Process(Msg(Req()), Ctx(1), log_);
  EXPECT_EQ(again.events[0].id, big.events[0].id);
  EXPECT_NE(tight.Process(Msg(Req()), Ctx(2), log_).events[0].request_id, big.events[0].request_id);

  Json bad = Req();
  bad["args"] = 7;
  StageResult r = ingest_.Process(Msg(bad), Ctx(3), log_);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.rejected");
  EXPECT_EQ(r.events[0].request_id, "r1");
  Json result = Json::parse(r.outputs[0].message.value);
  EXPECT_EQ(result["status"], "rejected");
  EXPECT_EQ(result["result"]["error"]["code"], "E_INVALID_REQUEST");
  EXPECT_EQ(r.outputs[0].log_seq_of_event, 0);
  // The id was never received, so a corrected request may use it.
  log_.Append(r);
  StageResult fixed = ingest_.Process(Msg(Req()), Ctx(4), log_);
  ASSERT_EQ(fixed.events.size(), 1u);
  EXPECT_EQ(fixed.events[0].type, "request.received");
}

TEST(Redact, FindsSecretsAtAnyDepthAndNamesThem) {
  Json j = {{"headers", {{"Authorization", "Bearer x"}, {"Accept", "json"}}},
            {"items", Json::array({{{"db_password", "p"}}, {{"ok", 1}}})},
            {"a/b~token", "t"}};
  auto paths = RedactSecrets(j, DefaultSecretKeyPatterns());
  EXPECT_EQ(j["headers"]["Authorization"], "[REDACTED]");
  EXPECT_EQ(j["headers"]["Accept"], "json");
  EXPECT_EQ(j["items"][0]["db_password"], "[REDACTED]");
  EXPECT_EQ(j["items"][1]["ok"], 1);
  std::vector<std::string> want = {"/a~1b~0token", "/headers/Authorization", "/items/0/db_password"};
  EXPECT_EQ(paths, want);
}

// The shipped default policy (config/default-policy.yaml): read-only
// built-ins run, mutating ones ask, secrets and unknown tools are denied.
TEST(Decide, DefaultPolicyAllowsReadOnlyAsksMutatingDeniesSecrets) {
  PolicyPtr p;
  ASSERT_TRUE(LoadPolicyFile(TOLLGATE_SOURCE_DIR "/config/default-policy.yaml", &p).ok());
  PolicyInForce pif;
  pif.SetFile(p);
  BudgetLedger ledger;
  auto decide = [&](const std::string& tool, Json args) {
    Json req = {{"request_id", "r"}, {"org_id", "o"}, {"agent_id", "a"}, {"session_id", "s"}, {"tool", tool},
                {"args", std::move(args)}};
    return Decide(pif, ledger, DecideInput{&req, 1'795'000'000'000'000});
  };
  for (const char* t : {"echo", "current_time", "calculate", "read_file", "list_directory", "file_exists",
                        "search_files", "get_audit_log", "get_system_info"}) {
    EXPECT_EQ(decide(t, {{"path", "notes.txt"}})["verdict"], "allow") << t;
  }
  for (const char* t : {"write_file", "delete_file", "execute_command", "cli:deploy"}) {
    EXPECT_EQ(decide(t, {{"path", "notes.txt"}, {"command", "ls"}})["verdict"], "ask") << t;
  }
  EXPECT_EQ(decide("http_request", {{"method", "POST"}, {"url", "https://example.com/x"}})["verdict"], "ask");
  EXPECT_EQ(decide("http_request", {{"method", "GET"}, {"url", "https://example.com/x"}})["verdict"], "allow");
  EXPECT_EQ(decide("delete_file", {{"path", "/etc/shadow"}})["error_code"], "E_POLICY_DENIED");
  EXPECT_EQ(decide("read_file", {{"path", "app/.env"}})["error_code"], "E_POLICY_DENIED");
  EXPECT_EQ(decide("execute_command", {{"command", "cat ~/.ssh/id_rsa"}})["error_code"], "E_POLICY_DENIED");
  EXPECT_EQ(decide("teleport", Json::object())["error_code"], "E_UNKNOWN_TOOL");
}

TEST(Reconcile, RedrivesEachUnfinishedStepAndEndsWhatItCannot) {
  Topics topics;
  IngestStage ingest{IngestConfig{}};
  VectorLog log;
  Json plain = Req("p1");
  plain["args"] = {{"text", "hi"}};
  log.Append(ingest.Process(Msg(plain), {1, "i/t/0/1"}, log));
  std::vector<Event> ev;
  log.EventsOfRequest("p1", &ev);
  auto plan = PlanRedrive(ev, topics, 5);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->message.topic, "tollgate.decide");
  EXPECT_FALSE(plan->event);

  DecideConfig decide_config;
  decide_config.topics = topics;
  DecideStage decide{decide_config};
  PolicyPtr policy;
  ASSERT_TRUE(LoadPolicyFile(TOLLGATE_SOURCE_DIR "/config/default-policy.yaml", &policy).ok());
  decide.UsePolicy(policy);
  Message to_decide = plan->message;
  log.Append(decide.Process(to_decide, {2, "i/d/0/1"}, log));
  log.EventsOfRequest("p1", &ev);
  plan = PlanRedrive(ev, topics, 5);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->message.topic, "tollgate.execute");

  ExecuteConfig execute_config;
  execute_config.topics = topics;
  ExecuteStage execute{execute_config};
  log.Append(execute.Process(plan->message, {3, "i/e/0/1"}, log));
  log.EventsOfRequest("p1", &ev);
  EXPECT_FALSE(PlanRedrive(ev, topics, 5)) << "finished requests are left alone";
  // A re-sent copy to execute does not run the tool again.
  EXPECT_TRUE(execute.Process(plan->message, {4, "i/e/0/2"}, log).events.empty());

  // A request whose secrets were redacted cannot be re-driven: it is ended.
  log.Append(ingest.Process(Msg(Req("s1")), {1, "i/t/0/2"}, log));
  log.EventsOfRequest("s1", &ev);
  plan = PlanRedrive(ev, topics, 5);
  ASSERT_TRUE(plan);
  ASSERT_TRUE(plan->event);
  EXPECT_EQ(plan->event->data["error"]["code"], "E_REQUEST_LOST");
  EXPECT_EQ(plan->message.topic, "tollgate.results");
}

}  // namespace
}  // namespace tollgate
