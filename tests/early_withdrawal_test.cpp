// A withdrawal that reaches the approve stage before the ask it withdraws
// (the MCP gateway withdraws the moment its client gives up; issue 31):
// kept in the request's history, it ends the ask at once, withdrawn, and
// nobody can approve the call. The stage as a pure function.
#include <gtest/gtest.h>

#include <map>

#include "approve/approve_stage.h"
#include "approve_util.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "core/request_state.h"
#include "core/withdraw.h"

namespace tollgate {
namespace {

using testing::AskSpec;
using testing::MakeAsk;

constexpr int64_t kT0 = 1'790'000'000'000'000;

class MemoryLog : public LogView {
 public:
  Status EventsOfRequest(const std::string& org, const std::string& rid,
                         std::vector<Event>* out) const override {
    out->clear();
    for (const Event& e : events) {
      if (e.org_id == org && e.request_id == rid) out->push_back(e);
    }
    return Status::Ok();
  }
  void Append(const std::vector<Event>& more) { events.insert(events.end(), more.begin(), more.end()); }
  std::vector<Event> events;
};

class EarlyWithdrawalTest : public ::testing::Test {
 protected:
  EarlyWithdrawalTest() {
    for (const char* who : {"agent-1", "agent-2"}) Register("agent_key", "org-1", who, {}, &agents_[who]);
    Register("approver_key", "org-1", "alice", {"approver"}, &alice_);
  }
  void Register(const std::string& kind, const std::string& org, const std::string& id,
                const std::vector<std::string>& roles, JwtSigner* out) {
    Credential c;
    ASSERT_TRUE(NewSigningKey(kind, org, id, roles, "test", &c, out).ok());
    registry_.Apply(CredentialAddedEvent(c, kT0));
  }
  StageResult Process(const Message& m, const std::string& source) {
    StageResult r = stage_.Process(m, {kT0 + 2'000'000, source}, log_);
    log_.Append(r.events);
    return r;
  }
  StageResult Withdraw(const std::string& agent, const std::string& source) {
    return Process(
        WithdrawMessage(topics_, agents_[agent], "org-1", agent, "r1", "cancelled", kT0 / 1'000'000), source);
  }
  Message AskMessage() {
    auto ask = MakeAsk(AskSpec{}, kT0);
    log_.Append(ask.events);  // what ingest and decide logged
    Message m;
    m.topic = topics_.approve();
    m.value = ask.flow.ToJson().dump();
    return m;
  }
  RequestState State(std::vector<Event>* history) {
    log_.EventsOfRequest("org-1", "r1", history);
    return Summarize(*history);
  }

  Topics topics_;
  CredentialRegistry registry_;
  std::map<std::string, JwtSigner> agents_;
  JwtSigner alice_;
  ApproveStage stage_{[this] {
    ApproveConfig c;
    c.topics = topics_;
    c.authenticate = RegistryAuthenticator(&registry_, kDefaultMaxSkewUs);
    return c;
  }()};
  MemoryLog log_;
};

TEST_F(EarlyWithdrawalTest, AWithdrawalBeforeTheRequestIsInTheLogIsKeptUnderOrgUnknownNamingTheAgentsOrg) {
  StageResult r = Withdraw("agent-1", "inc/responses/0/1");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.refused");
  EXPECT_EQ(r.events[0].data["code"], approve_errc::kUnknown);
  // Not in the history of the request it names (a request's first event is
  // its request.received), but found by the ask all the same.
  EXPECT_EQ(r.events[0].org_id, "unknown");
  EXPECT_EQ(r.events[0].data["approver"], "agent-1");
  EXPECT_EQ(r.events[0].data["approver_org"], "org-1");
}

TEST_F(EarlyWithdrawalTest, AWithdrawalAfterTheRequestWasReceivedButBeforeItWasHeldEndsTheAsk) {
  Message ask = AskMessage();  // received and decided, not yet held
  StageResult w = Withdraw("agent-1", "inc/responses/0/1");
  ASSERT_EQ(w.events.size(), 1u);
  EXPECT_EQ(w.events[0].org_id, "org-1");
  StageResult r = Process(ask, "inc/approve/0/1");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.denied");
  EXPECT_EQ(r.events[0].data["withdrawn"], true);
  EXPECT_EQ(stage_.pending(), 0u);
}

TEST_F(EarlyWithdrawalTest, TheAskThatComesAfterItsWithdrawalEndsWithdrawnAndIsNeverPutToApprovers) {
  Withdraw("agent-1", "inc/responses/0/1");
  StageResult r = Process(AskMessage(), "inc/approve/0/1");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.denied");
  EXPECT_EQ(r.events[0].data["withdrawn"], true);
  EXPECT_EQ(r.events[0].data["approver"], "agent-1");
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, topics_.results());
  EXPECT_EQ(r.outputs[0].value_json["status"], "denied");
  EXPECT_EQ(r.outputs[0].value_json["result"]["error"]["code"], "E_WITHDRAWN");
  EXPECT_EQ(stage_.pending(), 0u);

  // An approver's grant finds nothing to release.
  Json grant = testing::Response("r1", "approve", "alice", ArgsHash(AskSpec{}.args));
  Message m;
  m.topic = topics_.approval_responses();
  m.value = grant.dump();
  m.headers[kHeaderAuth] = SignResponse(alice_, "alice", "org-1", "r1", m.value, kT0 / 1'000'000);
  StageResult late = Process(m, "inc/responses/0/2");
  ASSERT_EQ(late.events.size(), 1u);
  EXPECT_EQ(late.events[0].type, "approval.refused");
  EXPECT_TRUE(late.outputs.empty()) << "nothing forwarded to execute";
  std::vector<Event> history;
  RequestState st = State(&history);
  EXPECT_TRUE(st.terminal());
  EXPECT_FALSE(st.cleared());
}

TEST_F(EarlyWithdrawalTest, TheAskReadAgainAfterACrashSendsItsWithdrawnResultAgain) {
  Withdraw("agent-1", "inc/responses/0/1");
  Message ask = AskMessage();
  Process(ask, "inc/approve/0/1");
  StageResult again = Process(ask, "inc/approve/0/1");
  EXPECT_TRUE(again.events.empty());
  ASSERT_EQ(again.outputs.size(), 1u);
  EXPECT_EQ(again.outputs[0].value_json["result"]["error"]["code"], "E_WITHDRAWN");
}

TEST_F(EarlyWithdrawalTest, AnotherAgentsEarlyWithdrawalDoesNotStopTheAsk) {
  Withdraw("agent-2", "inc/responses/0/1");
  // Nor does one by an agent of the same name in another org.
  JwtSigner other;
  Register("agent_key", "org-2", "agent-1", {}, &other);
  Process(WithdrawMessage(topics_, other, "org-2", "agent-1", "r1", "not mine", kT0 / 1'000'000),
          "inc/responses/0/2");
  StageResult r = Process(AskMessage(), "inc/approve/0/1");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.requested");
  EXPECT_EQ(stage_.pending(), 1u);
}

}  // namespace
}  // namespace tollgate
