// One fold per kind of state: decide's (policy in force + budget ledger,
// decide/decide_state.h) and approve's (pending approvals,
// approve/pending_approvals.h). Over a log the real stages wrote, each fold
// gives the same state whichever way it is reached: live through the
// listener, rebuilt at start, event by event, twice over, and (decide's)
// in replay's re-decision.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>

#include "approve/approve_stage.h"
#include "approve/pending_approvals.h"
#include "audit/approvals.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/sha256.h"
#include "decide/decide_stage.h"
#include "decide/decide_state.h"
#include "replay/redecide.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'796'000'000'000'000;
constexpr int64_t kSec = 1'000'000;

// Reads cost $1 against a $3.50 session budget; writes ask two approvers
// and wait a minute.
constexpr const char* kPolicy = R"(
version: 1
mode: ask
approval_threshold: HIGH
deny: ["delete_file:*"]
allow: [builtin:echo, builtin:read_file]
tools:
  read_file: {danger: LOW, read_only: true, cost_usd: 1}
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 3.5}
approvals:
  default: {quorum: 2, timeout_s: 60}
)";

// The ledger's entries (applied_seq says how far a fold read, which differs
// between a fold of the whole log and replay's, which stops at the target's
// last event).
bool SameEntries(BudgetLedger a, BudgetLedger b) {
  a.set_applied_seq(0);
  b.set_applied_seq(0);
  return a == b;
}

// A session the real decide and approve stages process over a RocksDB log,
// their listeners on the sink as the pipeline wires them.
class StateFoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LogOptions o;
    o.durability = Durability::kBuffered;
    ASSERT_TRUE(EventLog::Open(dir_.sub("log"), o, &log_).ok());
    sink_ = std::make_unique<LogSink>(*log_);
    view_ = std::make_unique<StoreLogView>(log_->store());
    ApproveConfig ac;
    ac.topics = topics_;
    // Who answers is the response's own approver: signatures are
    // approve_test's subject, not this one's.
    ac.authenticate = [](const Message& in, int64_t, ApproverIdentity* who, std::string*) {
      Json j;
      if (!ParseJson(in.value, &j).ok() || !j.is_object()) return false;
      *who = ApproverIdentity{j.value("approver", ""), "o1"};
      return true;
    };
    approve_ = std::make_unique<ApproveStage>(ac);
    sink_->AddListener([this](const std::vector<Event>& ev) { decide_.OnAppended(ev); });
    sink_->AddListener([this](const std::vector<Event>& ev) { approve_->OnAppended(ev); });
    policy_ = MustLoad(kPolicy);
    Append({PolicyUpdatedEvent(*policy_, kT0)});
  }

  static PolicyPtr MustLoad(const std::string& yaml) {
    PolicyPtr p;
    Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return p;
  }

  void Append(std::vector<Event> events) {
    std::vector<EventSink::Appended> res;
    sink_->AppendAll(std::move(events), &res);
    for (auto& x : res) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  }
  StageContext Ctx(int64_t at) { return {at, "inc/t/0/" + std::to_string(++offset_)}; }
  // Runs `stage` on `m` and appends what it logged; returns its outputs.
  std::vector<StageOutput> Run(Stage& stage, const Message& m, int64_t at) {
    StageResult r = stage.Process(m, Ctx(at), *view_);
    EXPECT_TRUE(r.error.ok()) << r.error.ToString();
    Append(r.events);
    return r.outputs;
  }

  // One call of session s1 received at `at`: ingest's request.received,
  // then decide, then approve when decide asks. Returns the verdict.
  std::string Call(const std::string& rid, const std::string& tool, Json args, int64_t at) {
    Json request{{"request_id", rid},  {"org_id", "o1"}, {"agent_id", "a1"},
                 {"session_id", "s1"}, {"tool", tool},   {"args", args}};
    std::string canon;
    EXPECT_TRUE(CanonicalBytes(request, &canon).ok());
    args_hash_[rid] = ArgsHash(args);
    Event received = testing::MakeEvent("request.received", rid, "s1", "a1", "o1", tool, at);
    received.data = {{"request", request},
                     {"args_hash", args_hash_[rid]},
                     {"content_hash", Sha256Hex(canon)},
                     {"received_at", FormatTime(at)}};
    Append({received});
    Flow flow{request, FormatTime(at), args_hash_[rid], nullptr};
    Message m;
    m.topic = topics_.decide();
    m.key = "a1";
    m.value = flow.ToJson().dump();
    std::string verdict = "?";
    for (const StageOutput& out : Run(decide_, m, at)) {
      Json j;
      EXPECT_TRUE(ParseJson(out.message.value, &j).ok());
      if (out.message.topic == topics_.approve()) {
        verdict = "ask";
        // Held: the agent is only told its call waits (a pending message).
        const std::vector<StageOutput> held = Run(*approve_, out.message, at);
        EXPECT_EQ(held.size(), 1u) << "held";
        for (const StageOutput& o : held) EXPECT_EQ(o.value_json.value("status", ""), "pending");
      } else {
        verdict = out.message.topic == topics_.execute() ? "allow" : "deny";
      }
    }
    return verdict;
  }
  void Respond(const std::string& rid, const std::string& decision, const std::string& approver, int64_t at,
               const std::string& scope = "once") {
    Message m;
    m.topic = topics_.approval_responses();
    m.key = approver;
    m.value = Json{{"request_id", rid},
                   {"decision", decision},
                   {"approver", approver},
                   {"scope", scope},
                   {"args_hash", args_hash_.at(rid)}}
                  .dump();
    Run(*approve_, m, at);
  }
  void Completed(const std::string& rid, const std::string& tool, double cost, int64_t at) {
    Append({testing::MakeEvent("execution.completed", rid, "s1", "a1", "o1", tool, at,
                               {{"result", ToolResultOk({{"ok", true}}, 1)},
                                {"duration_ms", 1},
                                {"cost_usd", cost},
                                {"source", "test"}})});
  }

  // Reads that reserve, settle and run into the budget; writes granted by
  // the quorum, half-granted, denied, left waiting and expired; an "allow
  // always" that adds an agent-local rule, and the call it then allows.
  void RecordSession() {
    ASSERT_EQ(Call("r1", "read_file", {{"path", "/a/1"}}, kT0 + 1 * kSec), "allow");
    Completed("r1", "read_file", 0.5, kT0 + 2 * kSec);
    ASSERT_EQ(Call("r2", "read_file", {{"path", "/a/2"}}, kT0 + 3 * kSec), "allow");
    Completed("r2", "read_file", 1.0, kT0 + 4 * kSec);
    ASSERT_EQ(Call("r3", "read_file", {{"path", "/a/3"}}, kT0 + 5 * kSec), "allow");  // reserved, not settled
    ASSERT_EQ(Call("r4", "read_file", {{"path", "/a/4"}}, kT0 + 6 * kSec), "allow");
    ASSERT_EQ(Call("r5", "read_file", {{"path", "/a/5"}}, kT0 + 7 * kSec), "deny")
        << "$0.50 + $1 + $1 + $1 + $1 > $3.50";
    ASSERT_EQ(Call("d1", "delete_file", {{"path", "/a/1"}}, kT0 + 8 * kSec), "deny");
    ASSERT_EQ(Call("w5", "write_file", {{"path", "/w/5"}, {"content", "x"}}, kT0 + 10 * kSec), "ask");
    StageResult expired = approve_->Tick({kT0 + 100 * kSec, ""}, *view_);  // w5's deadline passed
    ASSERT_EQ(expired.events.size(), 1u);
    Append(expired.events);

    ASSERT_EQ(Call("w1", "write_file", {{"path", "/w/1"}, {"content", "x"}}, kT0 + 200 * kSec), "ask");
    Respond("w1", "approve", "alice", kT0 + 201 * kSec);
    Respond("w1", "approve", "bob", kT0 + 202 * kSec);
    Completed("w1", "write_file", 0, kT0 + 203 * kSec);
    ASSERT_EQ(Call("w2", "write_file", {{"path", "/w/2"}, {"content", "x"}}, kT0 + 204 * kSec), "ask");
    Respond("w2", "approve", "alice", kT0 + 205 * kSec);  // one of two
    Respond("w2", "approve", "alice", kT0 + 206 * kSec);  // refused: the same approver again
    ASSERT_EQ(Call("w3", "write_file", {{"path", "/w/3"}, {"content", "x"}}, kT0 + 207 * kSec), "ask");
    Respond("w3", "deny", "bob", kT0 + 208 * kSec);
    ASSERT_EQ(Call("w4", "write_file", {{"path", "/w/4"}, {"content", "x"}}, kT0 + 209 * kSec), "ask");
    ASSERT_EQ(Call("w6", "write_file", {{"path", "/w/6"}, {"content", "x"}}, kT0 + 210 * kSec), "ask");
    Respond("w6", "approve", "alice", kT0 + 211 * kSec, "always");
    Respond("w6", "approve", "bob", kT0 + 212 * kSec, "always");
    ASSERT_EQ(Call("w7", "write_file", {{"path", "/w/6"}, {"content", "y"}}, kT0 + 213 * kSec), "allow")
        << "the agent-local rule allows the path approved always";
    ASSERT_EQ(approve_->pending(), 2u) << "w2 (half granted) and w4";
  }

  ReadEventFn Reader() {
    return [this](uint64_t seq, Event* e) { return log_->store().ReadEvent(seq, e); };
  }
  // Every event of the log, in seq order.
  std::vector<Event> AllEvents() {
    std::vector<Event> all;
    for (uint64_t seq = 1; seq <= log_->head_seq(); ++seq) {
      Event e;
      EXPECT_TRUE(log_->store().ReadEvent(seq, &e).ok());
      all.push_back(std::move(e));
    }
    return all;
  }

  TempDir dir_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<LogSink> sink_;
  std::unique_ptr<StoreLogView> view_;
  Topics topics_;
  DecideStage decide_{DecideConfig{}};
  std::unique_ptr<ApproveStage> approve_;
  PolicyPtr policy_;
  std::map<std::string, std::string> args_hash_;
  int offset_ = 0;
};

TEST_F(StateFoldTest, DecideFoldedEventByEventEqualsTheLiveStageTheRebuildAndReplaysReDecision) {
  RecordSession();
  DecideState by_event;
  for (const Event& e : AllEvents()) ASSERT_TRUE(by_event.Apply(e).ok());

  DecideStage rebuilt{DecideConfig{}};
  ASSERT_TRUE(rebuilt.Rebuild(log_->head_seq(), Reader(), "").ok());

  const replay::Target target = replay::Target::Session("s1");
  std::vector<replay::DecisionInput> inputs;
  ASSERT_TRUE(replay::ReadDecisionInputs(log_->store(), target, &inputs).ok());
  replay::Redecider redecider(target, {});
  for (replay::DecisionInput& in : inputs) redecider.Fold(in);

  const BudgetLedger live = decide_.ledger();
  EXPECT_EQ(live.size(), 11u) << "every decision holds an entry but the two denials";
  EXPECT_EQ(live.Sum(BudgetLedger::Scope::kSession, "o1", "a1", "s1", "", INT64_MIN, INT64_MAX, "").micros,
            3'500'000)
      << "r1 and r2 settled at $0.50 and $1, r3 and r4 reserved at $1";
  for (const char* released : {"w3", "w5"}) {
    const BudgetEntry* e = live.Find("o1", released);
    ASSERT_NE(e, nullptr) << released;
    EXPECT_EQ(e->state, BudgetEntry::State::kReleased) << released << ": denied or expired";
  }
  EXPECT_TRUE(by_event.ledger() == live);
  EXPECT_TRUE(rebuilt.ledger() == live);
  EXPECT_TRUE(SameEntries(redecider.state().ledger(), live));
  const std::string version = decide_.policy().version("o1");
  EXPECT_NE(version.find("+local:"), std::string::npos) << "the allow-always rule is in force: " << version;
  EXPECT_EQ(by_event.policy().version("o1"), version);
  EXPECT_EQ(rebuilt.policy().version("o1"), version);
  EXPECT_EQ(redecider.state().policy().version("o1"), version);
  EXPECT_EQ(by_event.local_rules().size(), 1u);
  EXPECT_EQ(redecider.state().local_rules(), by_event.local_rules());

  // And re-deciding under that state gives every decision the stage made.
  replay::RedecideReport report = redecider.Finish();
  EXPECT_TRUE(report.clean()) << replay::FormatReport(report);
  EXPECT_EQ(report.decisions, 13u);
}

TEST_F(StateFoldTest, AnEventAppliedTwiceCountsOnce) {
  RecordSession();
  const std::vector<Event> all = AllEvents();
  DecideState once, twice;
  PendingApprovals pending_once, pending_twice;
  for (const Event& e : all) {
    ASSERT_TRUE(once.Apply(e).ok());
    pending_once.Apply(e);
    ASSERT_TRUE(twice.Apply(e).ok());
    ASSERT_TRUE(twice.Apply(e).ok());
    pending_twice.Apply(e);
    pending_twice.Apply(e);
  }
  // The whole log again, as a listener re-delivering groups would.
  for (const Event& e : all) {
    ASSERT_TRUE(twice.Apply(e).ok());
    pending_twice.Apply(e);
  }
  EXPECT_TRUE(twice.ledger() == once.ledger());
  EXPECT_EQ(twice.policy().version("o1"), once.policy().version("o1"));
  EXPECT_EQ(twice.local_rules().size(), 1u);
  ASSERT_EQ(pending_twice.size(), pending_once.size());
  for (const auto& [key, h] : pending_once.held()) {
    const PendingApprovals::Held* t = pending_twice.Find(h.org_id, h.request_id);
    ASSERT_NE(t, nullptr) << h.request_id;
    EXPECT_EQ(t->granted_by, h.granted_by) << "a grant applied twice is one approver";
    EXPECT_EQ(t->deadline_us, h.deadline_us);
  }
}

TEST_F(StateFoldTest, PendingApprovalsFoldMatchesTheLogsListWhicheverWayItIsRead) {
  RecordSession();
  std::vector<PendingApproval> listed;
  ASSERT_TRUE(ListPendingApprovals(log_->store(), {}, &listed).ok());
  ASSERT_EQ(listed.size(), 2u);

  PendingApprovals whole_log, approvals_only;
  for (const Event& e : AllEvents()) whole_log.Apply(e);
  ASSERT_TRUE(ApprovalEvents(log_->store())([&](const Event& e) { approvals_only.Apply(e); }).ok());

  for (const PendingApprovals* fold : {&whole_log, &approvals_only}) {
    ASSERT_EQ(fold->size(), listed.size());
    for (const PendingApproval& p : listed) {
      const PendingApprovals::Held* h = fold->Find(p.org_id, p.request_id);
      ASSERT_NE(h, nullptr) << p.request_id;
      EXPECT_EQ(h->deadline_us, p.deadline_us);
      EXPECT_EQ(h->needed, p.approvers_needed);
      EXPECT_EQ(h->granted_by, p.granted_by);
    }
    for (const char* settled : {"w1", "w3", "w5"}) EXPECT_EQ(fold->Find("o1", settled), nullptr) << settled;
  }
  // The whole log's fold saw them settle; the start-up walk reads only the
  // unfinished requests (audit/open_requests.h), so it never met them.
  EXPECT_TRUE(whole_log.finished("o1", "w1")) << "granted by the quorum";
  EXPECT_TRUE(whole_log.finished("o1", "w3")) << "denied";
  EXPECT_TRUE(whole_log.finished("o1", "w5")) << "expired";
  const PendingApprovals::Held* w2 = whole_log.Find("o1", "w2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->granted_by, std::vector<std::string>{"alice"});
  EXPECT_EQ(approve_->pending(), listed.size()) << "the live stage's fold agrees";
}

TEST_F(StateFoldTest, ApproveLoadedFromAReadFunctionExpiresItsApprovalsAfterARestart) {
  RecordSession();
  const uint64_t head = log_->head_seq();
  ApproveConfig ac;
  ac.topics = topics_;
  ApproveStage restarted(ac);
  ReadEventFn read = Reader();
  ASSERT_TRUE(restarted
                  .Load([&](const std::function<void(const Event&)>& visit) {
                    for (uint64_t seq = 1; seq <= head; ++seq) {
                      Event e;
                      Status s = read(seq, &e);
                      if (!s.ok()) return s;
                      visit(e);
                    }
                    return Status::Ok();
                  })
                  .ok());
  ASSERT_EQ(restarted.pending(), 2u);
  const int64_t deadline = kT0 + 204 * kSec + 60 * kSec;  // w2's: decided at +204 s, a minute to answer
  EXPECT_EQ(restarted.next_deadline_us(), deadline);

  StageResult early = restarted.Tick({deadline - 1, ""}, *view_);
  EXPECT_TRUE(early.events.empty()) << "nothing is due yet";
  StageResult due = restarted.Tick({kT0 + 300 * kSec, ""}, *view_);
  ASSERT_TRUE(due.error.ok()) << due.error.ToString();
  std::vector<std::string> expired;
  for (const Event& e : due.events) {
    EXPECT_EQ(e.type, "approval.expired");
    expired.push_back(e.request_id);
  }
  std::sort(expired.begin(), expired.end());
  EXPECT_EQ(expired, (std::vector<std::string>{"w2", "w4"}));
  ASSERT_EQ(due.outputs.size(), 2u);
  for (const StageOutput& out : due.outputs) {
    Json j;
    ASSERT_TRUE(ParseJson(out.message.value, &j).ok());
    EXPECT_EQ(j.value("status", ""), "expired");
  }
  restarted.OnAppended(due.events);
  EXPECT_EQ(restarted.pending(), 0u);
}

}  // namespace
}  // namespace tollgate
