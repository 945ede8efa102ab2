// History-aware policy (docs/policy.md, "History"): the session facts fold
// (decide/session_facts.h), labels, label and sequence rules in the engine,
// what the compiler refuses, the snapshot's form, replay's deferred fold,
// and decision.history's bytes.
#include <gtest/gtest.h>

#include "decide/decide_state.h"
#include "decide/policy_engine.h"
#include "replay/decision_bytes.h"

namespace tollgate {
namespace {

constexpr int64_t kT0 = 1'795'000'000'000'000;
constexpr int64_t kMin = 60'000'000;

const char* const kPolicy = R"(
mode: dangerous
labels:
  trusted_hosts: [localhost]
  trusted_servers: [files]
  secret: ["read_file:*/secrets/*"]
  confidential: ["cli:db-dump*"]
rules:
  - name: no-exfil-after-untrusted
    after: {result: {integrity: untrusted}}
    within: {calls: 5}
    then: {tool: http_request, when: {method: POST}}
    verdict: deny
    reason: no POST after untrusted content
  - name: no-network-with-secrets
    tool: [http_request]
    when: {session: {confidentiality: secret}}
    verdict: deny
  - name: delete-burst
    after: {tool: delete_file, count: 3}
    within: {minutes: 10}
    then: {tool: delete_file}
    verdict: ask
http_request: {allowed_methods: [GET, POST]}
)";

PolicyPtr MustLoad(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

std::string Refusal(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
  return s.ok() ? "" : s.message();
}

// A session's calls decided and folded as the decide stage folds them: its
// own decision, then the execution.completed the log appends.
class History : public ::testing::Test {
 protected:
  void SetUp() override { state_.SetFilePolicy(MustLoad(kPolicy)); }

  Json Req(const std::string& rid, const std::string& tool, Json args, const std::string& session = "s1") {
    return {{"request_id", rid},     {"org_id", "o1"}, {"agent_id", "a1"},
            {"session_id", session}, {"tool", tool},   {"args", std::move(args)}};
  }
  Json Decide(const Json& req, int64_t at = kT0) {
    DecideInput in{&req, at};
    in.facts = &state_.facts();
    return tollgate::Decide(state_.policy(), state_.ledger(), in);
  }
  Event Of(const Json& req, const char* type, Json data) {
    Event e;
    e.seq = ++seq_;
    e.type = type;
    e.time_us = now_;
    e.org_id = "o1";
    e.agent_id = "a1";
    e.session_id = req["session_id"];
    e.request_id = req["request_id"];
    e.tool = req["tool"];
    e.data = std::move(data);
    return e;
  }
  // Decides the call, folds the decision and (allowed) its completion;
  // returns the decision. *completed_seq: the completion's seq.
  Json Run(const Json& req, uint64_t* completed_seq = nullptr, Json result_data = Json::object()) {
    Json d = Decide(req, now_);
    EXPECT_TRUE(state_.Apply(Of(req, ev::kDecisionMade, d)).ok());
    if (d["verdict"] == "allow") {
      EXPECT_TRUE(state_.Apply(Of(req, ev::kExecutionCompleted, result_data)).ok());
      if (completed_seq != nullptr) *completed_seq = seq_;
    }
    now_ += kMin / 60;
    return d;
  }
  DecideState state_;
  uint64_t seq_ = 100;
  int64_t now_ = kT0;
};

Json Get(const std::string& host) { return {{"method", "GET"}, {"url", "http://" + host + ":8080/page"}}; }
Json Post(const std::string& host) { return {{"method", "POST"}, {"url", "http://" + host + ":8080/up"}}; }

TEST_F(History, APostAfterAnUntrustedFetchIsDeniedAndTheDecisionNamesTheFetch) {
  uint64_t fetch = 0;
  EXPECT_EQ(Run(Req("r1", "http_request", Get("127.0.0.1")), &fetch)["verdict"], "allow");
  const Json d = Run(Req("r2", "http_request", Post("localhost")));
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"], "org.rule:no-exfil-after-untrusted");
  EXPECT_EQ(d["history"]["rule"], "no-exfil-after-untrusted");
  EXPECT_EQ(d["history"]["matched"], Json::array({fetch}));
  EXPECT_EQ(d["history"]["integrity"], "untrusted");
  EXPECT_NE(d["reason"].get<std::string>().find("seq " + std::to_string(fetch)), std::string::npos)
      << d["reason"];
}

TEST_F(History, TheSameCallsInTheOtherOrderOrAnotherSessionAreAllowed) {
  EXPECT_EQ(Run(Req("r1", "http_request", Post("localhost")))["verdict"], "allow");
  EXPECT_EQ(Run(Req("r2", "http_request", Get("127.0.0.1")))["verdict"], "allow");
  EXPECT_EQ(Run(Req("r3", "http_request", Post("localhost"), "s2"))["verdict"], "allow");
  // A trusted host's content taints nothing.
  EXPECT_EQ(Run(Req("r4", "http_request", Get("localhost"), "s3"))["verdict"], "allow");
  EXPECT_EQ(Run(Req("r5", "http_request", Post("localhost"), "s3"))["verdict"], "allow");
}

TEST_F(History, TheWindowOfCallsEndsAfterNCompletedCalls) {
  uint64_t fetch = 0;
  Run(Req("r1", "http_request", Get("127.0.0.1")), &fetch);
  for (int i = 0; i < 4; ++i) Run(Req("e" + std::to_string(i), "echo", {{"message", "x"}}));
  // The fetch is the 5th call back: still within the last 5.
  EXPECT_EQ(Run(Req("r2", "echo", {{"message", "y"}}))["verdict"], "allow");
  // Now it is the 6th: out of the window.
  EXPECT_EQ(Run(Req("r3", "http_request", Post("localhost")))["verdict"], "allow");
}

TEST_F(History, ASecretReadThenAnyNetworkCallIsDenied) {
  uint64_t read = 0;
  Run(Req("r1", "read_file", {{"path", "/w/secrets/key"}}), &read);
  const Json d = Run(Req("r2", "http_request", Get("localhost")));
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["history"]["rule"], "no-network-with-secrets");
  EXPECT_EQ(d["history"]["confidentiality"], "secret");
  EXPECT_EQ(d["history"]["matched"], Json::array({read}));
  // An ordinary read does not.
  Run(Req("r3", "read_file", {{"path", "/w/notes"}}, "s2"));
  EXPECT_EQ(Run(Req("r4", "http_request", Get("localhost"), "s2"))["verdict"], "allow");
}

TEST_F(History, AResultWhoseRedactionFiredMakesTheSessionSecret) {
  Run(Req("r1", "echo", {{"message", "x"}}), nullptr, {{"redacted", Json::array({"$.result.data"})}});
  EXPECT_EQ(state_.facts().Find("o1", "s1")->confidentiality, Confidentiality::kSecret);
  EXPECT_EQ(Run(Req("r2", "http_request", Get("localhost")))["verdict"], "deny");
}

TEST_F(History, TheFourthDeleteWithinTenMinutesAsksAndSlowerDeletesDoNot) {
  std::vector<uint64_t> seqs(3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Run(Req("d" + std::to_string(i), "delete_file", {{"path", "/w/f" + std::to_string(i)}}),
                  &seqs[i])["verdict"],
              "allow");
  }
  const Json d = Run(Req("d3", "delete_file", {{"path", "/w/f3"}}));
  EXPECT_EQ(d["verdict"], "ask");
  EXPECT_EQ(d["history"]["matched"], Json(seqs));
  // Another session, and deletes eleven minutes apart.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Run(Req("x" + std::to_string(i), "delete_file", {{"path", "/w/g"}}, "s2"))["verdict"], "allow");
    now_ += 11 * kMin;
  }
}

TEST_F(History, McpResultsAreUntrustedUnlessTheirServerIsTrusted) {
  Integrity in;
  Confidentiality c;
  const CompiledLabels* labels = nullptr;
  ClassifyResult(labels, {"mcp:web/search", "mcp:web/search", ""}, &in, &c);
  EXPECT_EQ(in, Integrity::kUntrusted);
  // Calls of servers this policy does not declare, folded as if they ran.
  for (const char* tool : {"mcp:files/read", "mcp:web/search"}) {
    const Json req = Req(tool, tool, {});
    ASSERT_TRUE(state_.Apply(Of(req, ev::kDecisionMade, {{"verdict", "allow"}, {"invocation", tool}})).ok());
    ASSERT_TRUE(state_.Apply(Of(req, ev::kExecutionCompleted, Json::object())).ok());
    ASSERT_NE(state_.facts().Find("o1", "s1"), nullptr);
    EXPECT_EQ(state_.facts().Find("o1", "s1")->integrity,
              std::string(tool) == "mcp:files/read" ? Integrity::kTrusted : Integrity::kUntrusted);
  }
}

TEST_F(History, ADeclassifyingGrantCleansTheSessionOnceItsCallRan) {
  uint64_t fetch = 0;
  Run(Req("r1", "http_request", Get("127.0.0.1")), &fetch);
  const Json ask = Req("r2", "echo", {{"message", "x"}});
  ASSERT_TRUE(
      state_.Apply(Of(ask, ev::kDecisionMade, {{"verdict", "ask"}, {"invocation", "builtin:echo"}})).ok());
  ASSERT_TRUE(
      state_
          .Apply(Of(ask, ev::kApprovalGranted,
                    {{"approver", "alice"}, {"scope", "once"}, {"declassify", true}, {"comment", "read it"}}))
          .ok());
  EXPECT_EQ(state_.facts().Find("o1", "s1")->integrity, Integrity::kUntrusted);  // not until it ran
  ASSERT_TRUE(state_.Apply(Of(ask, ev::kExecutionCompleted, Json::object())).ok());
  const SessionFacts::Session* s = state_.facts().Find("o1", "s1");
  EXPECT_EQ(s->integrity, Integrity::kTrusted);
  EXPECT_EQ(s->declassified_by, "alice");
  EXPECT_EQ(s->declassified_why, "read it");
  EXPECT_EQ(Run(Req("r3", "http_request", Post("localhost")))["verdict"], "allow");
}

TEST_F(History, AGrantWhoseApprovalIsThenDeniedDeclassifiesNothing) {
  Run(Req("r1", "http_request", Get("127.0.0.1")));
  const Json ask = Req("r2", "echo", {{"message", "x"}});
  ASSERT_TRUE(
      state_.Apply(Of(ask, ev::kDecisionMade, {{"verdict", "ask"}, {"invocation", "builtin:echo"}})).ok());
  ASSERT_TRUE(state_
                  .Apply(Of(ask, ev::kApprovalGranted,
                            {{"approver", "alice"}, {"declassify", true}, {"comment", "ok"}}))
                  .ok());
  ASSERT_TRUE(state_.Apply(Of(ask, ev::kApprovalDenied, {{"approver", "bob"}})).ok());
  EXPECT_EQ(Run(Req("r3", "http_request", Post("localhost")))["verdict"], "deny");
}

TEST_F(History, FoldingACompletionTwiceCountsItOnce) {
  const Json req = Req("r1", "http_request", Get("127.0.0.1"));
  uint64_t done = 0;
  Run(req, &done);
  Event again = Of(req, ev::kExecutionCompleted, Json::object());
  again.seq = done;  // the same event, delivered again (the refold after a snapshot)
  ASSERT_TRUE(state_.Apply(again).ok());
  EXPECT_EQ(state_.facts().Find("o1", "s1")->calls, 1u);
}

TEST_F(History, TheSnapshotFormKeepsEverything) {
  Run(Req("r1", "http_request", Get("127.0.0.1")));
  Run(Req("r2", "read_file", {{"path", "/w/secrets/a"}}));
  for (int i = 0; i < 3; ++i) Run(Req("d" + std::to_string(i), "delete_file", {{"path", "/w/x"}}));
  const Json pending = Req("p1", "echo", {});
  ASSERT_TRUE(
      state_.Apply(Of(pending, ev::kDecisionMade, {{"verdict", "ask"}, {"invocation", "builtin:echo"}}))
          .ok());
  SessionFacts back;
  ASSERT_TRUE(SessionFacts::FromJson(state_.facts().ToJson(), &back).ok());
  EXPECT_EQ(back.ToJson(), state_.facts().ToJson());
  EXPECT_EQ(back.pending_calls(), 1u);
  EXPECT_FALSE(SessionFacts::FromJson(Json{{"pending", 1}}, &back).ok());
}

TEST_F(History, DecisionsRecordHowMuchHistoryTheySaw) {
  uint64_t fetch = 0;
  Run(Req("r1", "http_request", Get("127.0.0.1")), &fetch);
  const Json d = Decide(Req("r2", "echo", {}));
  EXPECT_EQ(d["history"]["upto"], fetch);
  EXPECT_EQ(d["history"]["calls"], 1);
  EXPECT_FALSE(d["history"].contains("rule"));
}

TEST(HistoryReplay, TheDeferredFoldTakesASessionUpToWhatTheDecisionSaw) {
  DecideState state;
  state.SetFilePolicy(MustLoad(kPolicy));
  state.mutable_facts().set_deferred(true);
  auto completed = [&](uint64_t seq, const std::string& rid, const std::string& url) {
    Event d;
    d.seq = seq;
    d.type = ev::kDecisionMade;
    d.org_id = "o1";
    d.session_id = "s1";
    d.request_id = rid;
    d.tool = "http_request";
    d.data = {{"verdict", "allow"}, {"invocation", "http_request:GET " + url}};
    ASSERT_TRUE(state.Apply(d).ok());
    d.seq = seq + 1;
    d.type = ev::kExecutionCompleted;
    d.data = Json::object();
    ASSERT_TRUE(state.Apply(d).ok());
  };
  completed(10, "r1", "http://localhost/a");  // trusted
  completed(20, "r2", "http://127.0.0.1/b");  // untrusted
  EXPECT_EQ(state.facts().Find("o1", "s1"), nullptr);
  state.mutable_facts().CatchUp("o1", "s1", 15);
  EXPECT_EQ(state.facts().Find("o1", "s1")->calls, 1u);
  EXPECT_EQ(state.facts().Find("o1", "s1")->integrity, Integrity::kTrusted);
  state.mutable_facts().CatchUp("o1", "s1", 21);
  EXPECT_EQ(state.facts().Find("o1", "s1")->integrity, Integrity::kUntrusted);
  EXPECT_EQ(state.facts().Find("o1", "s1")->integrity_seq, 21u);
}

TEST(HistoryRules, ThePolicyCheckRefusesWhatCouldNeverBeBounded) {
  const std::string head = "mode: ask\nrules:\n";
  EXPECT_NE(Refusal(head + "  - {name: a, after: {tool: echo}, then: {tool: echo}, verdict: deny}\n"), "");
  EXPECT_NE(Refusal(head + "  - {name: a, after: {tool: echo}, within: {calls: 0}, verdict: deny}\n"), "");
  EXPECT_NE(Refusal(head + "  - {name: a, after: {tool: echo}, within: {minutes: 20000}, verdict: deny}\n"),
            "");
  EXPECT_NE(
      Refusal(head + "  - {name: a, after: {tool: echo}, within: {calls: 3, minutes: 3}, verdict: deny}\n"),
      "");
  EXPECT_NE(Refusal(head + "  - {name: a, after: {tool: echo}, within: {calls: 3}, verdict: allow}\n"), "");
  EXPECT_NE(Refusal(head + "  - {name: a, after: {tool: reed_file}, within: {calls: 3}, verdict: deny}\n")
                .find("unknown tool 'reed_file'"),
            std::string::npos);
  EXPECT_NE(
      Refusal(head +
              "  - {name: a, after: {result: {integrity: dubious}}, within: {calls: 3}, verdict: deny}\n"),
      "");
  EXPECT_NE(
      Refusal(head + "  - {name: a, tool: echo, when: {session: {confidentiality: top}}, verdict: deny}\n"),
      "");
  EXPECT_NE(
      Refusal(head + "  - {name: a, tool: echo, after: {tool: echo}, within: {calls: 3}, verdict: deny}\n"),
      "");
  EXPECT_NE(Refusal("labels: {redacted: classified}\n"), "");
  // Globs and known tools load.
  EXPECT_EQ(Refusal(head + "  - {name: a, after: {tool: \"cli:*\", count: 2}, within: {calls: 3}, "
                           "then: {tool: write_file}, verdict: ask}\n"),
            "");
}

TEST(HistoryRules, APolicyWithoutHistoryRecordsNone) {
  DecideState state;
  state.SetFilePolicy(MustLoad("mode: ask\n"));
  const Json req = {{"request_id", "r"}, {"org_id", "o"},  {"agent_id", "a"},
                    {"session_id", "s"}, {"tool", "echo"}, {"args", Json::object()}};
  DecideInput in{&req, kT0};
  in.facts = &state.facts();
  EXPECT_FALSE(Decide(state.policy(), state.ledger(), in).contains("history"));
}

TEST(HistoryRules, TheDecisionBytesOfAHistoryDecisionAreItsCanonicalJson) {
  Decision d;
  d.verdict = "deny";
  d.reason = "r \"quoted\"";
  d.rule = "org.rule:x";
  d.has_history = true;
  d.history.upto = 41;
  d.history.calls = 7;
  d.history.integrity = Integrity::kUntrusted;
  d.history.confidentiality = Confidentiality::kSecret;
  for (bool with_rule : {false, true}) {
    if (with_rule) {
      d.history.rule = "no-\"exfil\"";
      d.history.matched = {12, 41};
    }
    Json compared = Json::object();
    const Json j = d.ToJson();
    for (const char* f : {"verdict", "reason", "rule", "danger_level", "policy_version", "error_code",
                          "reservation", "approval", "invocation", "read_only", "notify", "history"}) {
      if (j.contains(f)) compared[f] = j[f];
    }
    std::string want, got;
    ASSERT_TRUE(CanonicalBytes(compared, &want).ok());
    ASSERT_TRUE(replay::ComparedDecisionBytes(d, &got));
    EXPECT_EQ(got, want);
    uint64_t upto = 0;
    EXPECT_TRUE(replay::HistoryUpto(got, &upto));
    EXPECT_EQ(upto, 41u);
  }
}

}  // namespace
}  // namespace tollgate
