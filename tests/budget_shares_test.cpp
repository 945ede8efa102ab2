// tollgate_budget_usage_ratio (decide/budget_shares.h): per org and budget,
// the largest share of the limit any one holder has used in its window.
#include "decide/budget_shares.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "decide/decide_state.h"
#include "test_util.h"

namespace tollgate {
namespace {

constexpr int64_t kT0 = 1'795'000'000'000'000;
constexpr int64_t kMin = 60'000'000;

const char* kPolicy = R"(
mode: ask
allow: ["*:*"]
budgets:
  - {name: session-calls, scope: session, window: session, max_calls: 10}
  - {name: agent-hour-usd, scope: agent, window: hour, max_usd: 2}
  - {name: org-minute-calls, scope: org, window: minute, max_calls: 100}
  - {name: bob-echo-calls, scope: agent, window: day, agent: bob, tool: echo, max_calls: 4}
)";

class BudgetSharesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PolicyPtr p;
    ASSERT_TRUE(LoadPolicyYaml(kPolicy, "test.yaml", &p).ok());
    state_.SetFilePolicy(p);
  }
  // One call decided (and allowed, with its reservation) at `at`.
  void Call(const std::string& org, const std::string& agent, const std::string& session,
            const std::string& tool, double usd, int64_t at) {
    const std::string rid = "r" + std::to_string(++n_);
    Json req = {{"request_id", rid},        {"org_id", org}, {"agent_id", agent},
                {"session_id", session},    {"tool", tool},  {"args", Json::object()},
                {"estimated_cost_usd", usd}};
    const Json d = Decide(state_.policy(), state_.ledger(), DecideInput{&req, at});
    ASSERT_EQ(d.value("verdict", ""), "allow") << d.dump();
    Event e = testing::MakeEvent("decision.made", rid, session, agent, org, tool, at, d);
    e.seq = ++seq_;
    ASSERT_TRUE(state_.Apply(e).ok());
  }
  std::map<std::string, double> Shares(int64_t now) {
    std::map<std::string, double> out;
    for (const BudgetShare& s : BudgetShares(state_.policy(), state_.ledger(), now))
      out[s.org + "/" + s.budget] = s.share;
    return out;
  }

  DecideState state_;
  int n_ = 0;
  uint64_t seq_ = 0;
};

TEST_F(BudgetSharesTest, EachBudgetReportsItsFullestHolderInItsWindow) {
  for (int i = 0; i < 3; ++i) Call("o1", "ann", "s1", "calculate", 0.25, kT0 + i);  // ann/s1: 3 calls, $0.75
  for (int i = 0; i < 6; ++i) Call("o1", "bob", "s2", "calculate", 0.0, kT0 + 10 + i);  // bob/s2: 6 calls
  Call("o1", "bob", "s3", "calculate", 1.5, kT0 + 20);  // bob: $1.50 this hour
  Call("o2", "cy", "s9", "calculate", 0.5, kT0 + 30);
  auto at_once = Shares(kT0 + 1000);
  EXPECT_DOUBLE_EQ(at_once["o1/session-calls"], 0.6) << "bob's session s2: 6 of 10";
  EXPECT_DOUBLE_EQ(at_once["o1/agent-hour-usd"], 0.75) << "bob: $1.50 of $2";
  EXPECT_DOUBLE_EQ(at_once["o1/org-minute-calls"], 0.10) << "10 calls of o1 in the minute";
  EXPECT_DOUBLE_EQ(at_once["o2/agent-hour-usd"], 0.25);
  EXPECT_DOUBLE_EQ(at_once["o2/bob-echo-calls"], 0) << "a budget nobody used is 0";
  // Rolling windows empty as time passes; a session window does not.
  auto later = Shares(kT0 + 61 * kMin);
  EXPECT_DOUBLE_EQ(later["o1/org-minute-calls"], 0);
  EXPECT_DOUBLE_EQ(later["o1/agent-hour-usd"], 0);
  EXPECT_DOUBLE_EQ(later["o1/session-calls"], 0.6);
}

TEST_F(BudgetSharesTest, AnAgentFilteredBudgetCountsOnlyItsAgentsCallsOfItsTool) {
  Call("o1", "bob", "s1", "echo", 0, kT0);
  Call("o1", "bob", "s1", "calculate", 0, kT0 + 1);
  for (int i = 0; i < 3; ++i) Call("o1", "ann", "s2", "echo", 0, kT0 + 2 + i);
  EXPECT_DOUBLE_EQ(Shares(kT0 + 10)["o1/bob-echo-calls"], 0.25);
  for (int i = 0; i < 3; ++i) Call("o1", "bob", "s1", "echo", 0, kT0 + 20 + i);
  EXPECT_DOUBLE_EQ(Shares(kT0 + 30)["o1/bob-echo-calls"], 1.0) << "full: bob's next echo is denied";
  Json req = {{"request_id", "over"}, {"org_id", "o1"}, {"agent_id", "bob"},
              {"session_id", "s1"},   {"tool", "echo"}, {"args", Json::object()}};
  EXPECT_EQ(Decide(state_.policy(), state_.ledger(), DecideInput{&req, kT0 + 31})["rule"],
            "budget:bob-echo-calls");
}

TEST_F(BudgetSharesTest, OnlyTheFullestOrgsAreKeptPastTheCap) {
  for (int o = 0; o < 5; ++o) {
    for (int i = 0; i <= o; ++i) Call("o" + std::to_string(o), "a", "s", "calculate", 0, kT0 + o * 10 + i);
  }
  std::set<std::string> orgs;
  for (const BudgetShare& s : BudgetShares(state_.policy(), state_.ledger(), kT0 + 100, 2))
    orgs.insert(s.org);
  EXPECT_EQ(orgs, (std::set<std::string>{"o3", "o4"}));
}

}  // namespace
}  // namespace tollgate
