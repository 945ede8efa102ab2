// The budget ledger prunes what no budget can still count (docs/policy.md,
// "Budgets"): a long run's ledger stays bounded, and every decision equals
// the one an unpruned ledger gives, through snapshots and refolds.
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "decide/decide_state.h"
#include "decide/policy_engine.h"
#include "test_util.h"

namespace tollgate {
namespace {

constexpr int64_t kT0 = 1'795'000'000'000'000;
constexpr int64_t kSec = 1'000'000;

// Session windows count a session's whole history (so pruned entries must
// still count there); the rolling ones a minute, an hour and a day.
const char* kPolicy = R"(
mode: ask
allow: ["*:*"]
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 200}
  - {name: session-echo-calls, scope: session, window: session, tool: echo, max_calls: 2500}
  - {name: agent-day-usd, scope: agent, window: day, max_usd: 120}
  - {name: agent-hour-calls, scope: agent, window: hour, max_calls: 70}
  - {name: org-minute-calls, scope: org, window: minute, max_calls: 5}
)";

struct TwoFolds {
  DecideState pruned, full;
  uint64_t seq = 0;
  std::deque<Event> recent;  // the last kRefoldMargin events, to fold again

  void Apply(Event e) {
    e.seq = ++seq;
    ASSERT_TRUE(pruned.Apply(e).ok());
    ASSERT_TRUE(full.Apply(e).ok());
    recent.push_back(std::move(e));
    if (recent.size() > kRefoldMargin) recent.pop_front();
  }
};

TEST(LedgerPruning, ALongRunsLedgerStaysBoundedAndDecidesAsAnUnprunedOne) {
  PolicyPtr policy;
  ASSERT_TRUE(LoadPolicyYaml(kPolicy, "test.yaml", &policy).ok());
  TwoFolds run;
  run.pruned.SetFilePolicy(policy);
  run.full.SetFilePolicy(policy);
  // One every 10 s for 7 days: the refold margin (4,096 events) is under
  // 6 hours, so the time horizon, not the margin, decides what goes.
  const int kRequests = 60000;
  size_t largest = 0, denied = 0, pruned_total = 0;
  std::map<std::string, int> denied_by;
  for (int i = 0; i < kRequests; ++i) {
    const int64_t at = kT0 + int64_t{i} * 10 * kSec;
    const std::string agent = "a" + std::to_string(i % 4);
    const std::string session = agent + "-s" + std::to_string(i / 24000);  // 2.8 days each
    const std::string rid = "r" + std::to_string(i);
    Json req = {{"request_id", rid},
                {"org_id", "o1"},
                {"agent_id", agent},
                {"session_id", session},
                {"tool", i % 3 ? "echo" : "calculate"},
                {"args", Json::object()},
                {"estimated_cost_usd", 0.05 * (i % 9)}};
    const Json got = Decide(run.pruned.policy(), run.pruned.ledger(), DecideInput{&req, at});
    const Json want = Decide(run.full.policy(), run.full.ledger(), DecideInput{&req, at});
    ASSERT_EQ(got, want) << "request " << i << " of " << kRequests;
    if (got.value("verdict", "") == "deny") {
      ++denied;
      ++denied_by[got.value("rule", "")];
    }

    Event d = testing::MakeEvent("decision.made", rid, session, agent, "o1", req["tool"].get<std::string>(),
                                 at, got);
    run.Apply(d);
    if (got.value("verdict", "") != "deny" && i % 97 != 0) {  // every 97th stays reserved
      Event end = testing::MakeEvent(i % 7 ? "execution.completed" : "approval.denied", rid, session, agent,
                                     "o1", req["tool"].get<std::string>(), at + 2 * kSec,
                                     Json{{"cost_usd", 0.04 * (i % 5)}});
      run.Apply(end);
    }
    run.pruned.MaybePrune();
    largest = std::max(largest, run.pruned.ledger().size());

    if (i == kRequests / 2) {
      // A restart: the snapshot's ledger, then the margin folded again.
      const std::string bytes = run.pruned.ledger().Serialize();
      BudgetLedger restored;
      ASSERT_TRUE(BudgetLedger::Deserialize(bytes, &restored).ok());
      ASSERT_TRUE(restored == run.pruned.ledger());
      ASSERT_GT(restored.pruned_seq(), 0u);
      for (const Event& e : run.recent) restored.Apply(e);
      EXPECT_TRUE(restored == run.pruned.ledger()) << "folding the margin again changes nothing";
      run.pruned.mutable_ledger() = restored;
      pruned_total = run.full.ledger().size() - restored.size();
    }
  }
  // A session window (what pruning keeps as sums), the day (the longest
  // rolling window) and a minute must bite, or equal decisions prove little.
  for (const char* b : {"session-usd", "agent-day-usd", "org-minute-calls"}) {
    EXPECT_GT(denied_by[std::string("budget:") + b], 50) << b;
  }
  EXPECT_GT(pruned_total, 5000u);
  EXPECT_EQ(run.full.ledger().size(), static_cast<size_t>(kRequests) - denied);
  // Two days of one every 10 s is at most 17,280 entries (fewer: denials
  // make none), plus the ones never settled and one pruning interval's.
  EXPECT_LT(largest, 20000u) << "unpruned: " << run.full.ledger().size();
  EXPECT_LT(run.pruned.ledger().size() * 2, run.full.ledger().size());
  std::cout << "[ ledger ] " << kRequests << " requests, " << denied << " denied; unpruned "
            << run.full.ledger().size() << " entries, pruned at most " << largest << "; denied by";
  for (const auto& [rule, n] : denied_by) std::cout << " " << rule << " " << n;
  std::cout << "\n";
}

TEST(LedgerPruning, AReservedEntryIsNeverPrunedAndItsSettlementStillCounts) {
  BudgetLedger l;
  Json req = {{"org_id", "o1"}, {"agent_id", "a1"}, {"session_id", "s1"}, {"tool", "echo"}};
  auto reservation = [](double usd, int64_t at) {
    return Json{{"verdict", "allow"}, {"reservation", {{"usd", usd}, {"received_at", FormatTime(at)}}}};
  };
  l.ApplyDecision("old", req, reservation(1.0, kT0), 1);
  l.ApplyDecision("settled", req, reservation(2.0, kT0), 2);
  Event done = testing::MakeEvent("execution.completed", "settled");
  done.data = {{"cost_usd", 0.5}};
  done.seq = 3;
  l.Apply(done);
  // Three days later, a new entry moves the horizon past both.
  l.ApplyDecision("new", req, reservation(4.0, kT0 + 3 * 86'400 * kSec), 4);
  auto session = [&] {
    return l.Sum(BudgetLedger::Scope::kSession, "o1", "a1", "s1", "", INT64_MIN, kT0 + 4 * 86'400 * kSec, "");
  };
  const BudgetLedger::Usage before = session();
  EXPECT_EQ(l.Prune(4), 1u) << "only the settled one";
  EXPECT_EQ(l.Find("o1", "settled"), nullptr);
  ASSERT_NE(l.Find("o1", "old"), nullptr);
  EXPECT_EQ(session().micros, before.micros) << "the session window still counts what was pruned";
  EXPECT_EQ(session().calls, before.calls);
  // Settling the old one later still counts; the pruned one's decision
  // seen again (a refold) does not come back.
  done.request_id = "old";
  done.seq = 5;
  l.Apply(done);
  Event again = testing::MakeEvent("decision.made", "settled");
  again.data = reservation(2.0, kT0);
  again.seq = 2;
  l.Apply(again);
  EXPECT_EQ(l.Find("o1", "settled"), nullptr);
  EXPECT_EQ(session().micros, 500'000 + 500'000 + 4'000'000);
  EXPECT_EQ(session().calls, 3);
  // A rolling window over the last day sees only the new one.
  EXPECT_EQ(l.Sum(BudgetLedger::Scope::kAgent, "o1", "a1", "", "", kT0 + 2 * 86'400 * kSec,
                  kT0 + 4 * 86'400 * kSec, "")
                .micros,
            4'000'000);
}

}  // namespace
}  // namespace tollgate
