// replay/: timelines, the session chain check and recordings, on sessions
// recorded through a real log (RocksDB in a temp dir).
#include <gtest/gtest.h>
#include <httplib.h>
#include <rocksdb/db.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "api/http_api.h"
#include "audit/event_log.h"
#include "audit/export.h"
#include "audit/log_format.h"
#include "core/messages.h"
#include "core/sha256.h"
#include "replay/canonical_scan.h"
#include "replay/chain_check.h"
#include "replay/decision_bytes.h"
#include "replay/from_log.h"
#include "replay/log_source.h"
#include "replay/recording.h"
#include "replay/redecide.h"
#include "replay/timeline.h"
#include "test_util.h"

namespace tollgate::replay {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'790'000'000'000'000;  // 2026-09-21T...

// Appends a request's events the way the stages write them.
class Recorder {
 public:
  explicit Recorder(EventLog& log) : log_(log) {}

  Event Base(const std::string& type, const std::string& rid, const std::string& session,
             const std::string& tool, int64_t t, Json data, const std::string& disc = "") {
    Event e;
    e.type = type;
    e.request_id = rid;
    e.id = MakeRequestEventId(org, type, rid, disc);  // request ids are scoped by org
    e.session_id = session;
    e.agent_id = agent;
    e.org_id = org;
    e.tool = tool;
    e.time_us = t;
    e.data = std::move(data);
    return e;
  }
  void Append(Event e) {
    AppendResult r = log_.Append(std::move(e));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  }
  void Received(const std::string& rid, const std::string& session, const std::string& tool, Json args,
                int64_t t) {
    Json req{{"request_id", rid},     {"org_id", org}, {"agent_id", agent},
             {"session_id", session}, {"tool", tool},  {"args", args}};
    Append(Base("request.received", rid, session, tool, t,
                {{"request", req}, {"args_hash", ArgsHash(args)}, {"received_at", FormatTime(t)}}));
  }
  void Decision(const std::string& rid, const std::string& session, const std::string& tool,
                const std::string& verdict, int64_t t, const std::string& rule = "r1",
                const std::string& version = "v1") {
    Json d{{"verdict", verdict},
           {"reason", "because " + rule},
           {"rule", rule},
           {"danger_level", "SAFE"},
           {"policy_version", version}};
    if (verdict == "deny") d["error_code"] = errc::kPolicyDenied;
    Append(Base("decision.made", rid, session, tool, t, d));
  }
  void Executed(const std::string& rid, const std::string& session, const std::string& tool, Json data,
                int64_t t0, int64_t t1, bool ok = true) {
    Append(Base("execution.started", rid, session, tool, t0, {{"executor", "builtin"}, {"attempt", 1}}, "1"));
    Json result =
        ok ? ToolResultOk(data, (t1 - t0) / 1000.0) : ToolResultError(errc::kToolExec, "boom", false);
    Append(Base("execution.completed", rid, session, tool, t1,
                {{"result", result}, {"duration_ms", (t1 - t0) / 1000.0}, {"cost_usd", 0.25}}));
  }
  // A whole allowed call.
  void Call(const std::string& rid, const std::string& session, const std::string& tool, Json args, Json out,
            int64_t t) {
    Received(rid, session, tool, args, t);
    Decision(rid, session, tool, "allow", t + 1000);
    Executed(rid, session, tool, out, t + 2000, t + 12000);
  }

  std::string agent = "agent-1";
  std::string org = "org-1";

 private:
  EventLog& log_;
};

class ReplayLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LogOptions o;
    o.durability = Durability::kBuffered;
    ASSERT_TRUE(EventLog::Open(dir_.sub("log"), o, &log_).ok());
    rec_ = std::make_unique<Recorder>(*log_);
  }
  // A session of four requests (allowed, denied, asked then approved after
  // 3 s, allowed and failing), interleaved with another session's calls.
  void RecordSession() {
    rec_->Call("r1", "s1", "echo", {{"text", "hi"}}, {{"text", "hi"}}, kT0);
    rec_->Call("x1", "other", "echo", {{"text", "x"}}, {{"text", "x"}}, kT0 + 5000);
    rec_->Received("r2", "s1", "delete_file", {{"path", "a"}}, kT0 + 100000);
    rec_->Decision("r2", "s1", "delete_file", "deny", kT0 + 101000, "deny-deletes");
    rec_->Received("r3", "s1", "write_file", {{"path", "b"}}, kT0 + 200000);
    rec_->Decision("r3", "s1", "write_file", "ask", kT0 + 201000, "ask-writes");
    rec_->Append(rec_->Base("approval.requested", "r3", "s1", "write_file", kT0 + 202000,
                            {{"approvers_needed", 1},
                             {"deadline", FormatTime(kT0 + 900'000'000)},
                             {"args_hash", ArgsHash({{"path", "b"}})}}));
    rec_->Call("x2", "other", "echo", {{"text", "y"}}, {{"text", "y"}}, kT0 + 300000);
    rec_->Append(rec_->Base("approval.granted", "r3", "s1", "write_file", kT0 + 3'202'000,
                            {{"approver", "alice"}, {"scope", "once"}, {"comment", "ok"}}, "alice"));
    rec_->Executed("r3", "s1", "write_file", {{"written", 1}}, kT0 + 3'203'000, kT0 + 3'250'000);
    rec_->Received("r4", "s1", "echo", {{"text", "fail"}}, kT0 + 4'000'000);
    rec_->Decision("r4", "s1", "echo", "allow", kT0 + 4'001'000);
    rec_->Executed("r4", "s1", "echo", nullptr, kT0 + 4'002'000, kT0 + 4'003'000, /*ok=*/false);
    rec_->Received("r5", "s1", "echo", {{"text", "late"}}, kT0 + 5'000'000);  // still pending
  }

  TempDir dir_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<Recorder> rec_;
};

TEST_F(ReplayLogTest, TimelineIsCompleteAndOrdered) {
  RecordSession();
  std::vector<Event> events;
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &events).ok());
  SessionTimeline t = BuildTimeline("s1", events);
  ASSERT_EQ(t.requests.size(), 5u);
  std::vector<std::string> ids;
  for (const auto& r : t.requests) ids.push_back(r.request_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"r1", "r2", "r3", "r4", "r5"}));
  // Every event of the session, none of the other session's.
  size_t steps = 0;
  uint64_t last_seq = 0;
  for (const auto& r : t.requests) {
    for (const auto& s : r.steps) {
      EXPECT_GT(s.seq, r.steps.front().seq - 1);
      EXPECT_GE(s.since_prev_us, 0);
      ++steps;
    }
    EXPECT_GT(r.first_seq, last_seq) << "requests in order of their first event";
    last_seq = r.first_seq;
  }
  EXPECT_EQ(steps, events.size());
  EXPECT_EQ(t.events, events.size());
  EXPECT_EQ(steps, 4u + 2 + 6 + 4 + 1);

  const auto& r1 = t.requests[0];
  EXPECT_EQ(r1.status, "completed");
  EXPECT_EQ(r1.verdict, "allow");
  EXPECT_EQ(r1.policy_version, "v1");
  EXPECT_TRUE(r1.executed && r1.success);
  EXPECT_DOUBLE_EQ(r1.duration_ms, 10.0);
  EXPECT_EQ(r1.steps[1].since_prev_us, 1000);
  EXPECT_EQ(r1.result["result"]["data"]["text"], "hi");

  const auto& r2 = t.requests[1];
  EXPECT_EQ(r2.status, "denied");
  EXPECT_EQ(r2.rule, "deny-deletes");
  EXPECT_EQ(r2.decision_error, errc::kPolicyDenied);
  EXPECT_FALSE(r2.executed);

  const auto& r3 = t.requests[2];
  EXPECT_EQ(r3.status, "completed");
  EXPECT_EQ(r3.verdict, "ask");
  ASSERT_EQ(r3.approvals.size(), 1u);
  EXPECT_EQ(r3.approvals[0].approver, "alice");
  EXPECT_EQ(r3.approvals[0].waited_us, 3'000'000);
  EXPECT_EQ(r3.steps[3].since_prev_us, 3'000'000) << "granted 3 s after the request for approval";

  EXPECT_EQ(t.requests[3].status, "failed");
  EXPECT_EQ(t.requests[3].error_code, errc::kToolExec);
  EXPECT_EQ(t.requests[4].status, "pending");
  EXPECT_TRUE(t.requests[4].result.is_null());
  EXPECT_EQ(t.counts["completed"], 2);
  EXPECT_DOUBLE_EQ(t.cost_usd, 0.75);

  // The JSON and the text say the same.
  Json j = TimelineToJson(t);
  EXPECT_EQ(j["requests"].size(), 5u);
  EXPECT_EQ(j["requests"][2]["approval"]["responses"][0]["waited_us"], 3'000'000);
  EXPECT_EQ(j["requests"][1]["decision"]["rule"], "deny-deletes");
  EXPECT_EQ(j["requests"][0]["execution"]["duration_ms"], 10.0);
  const std::string text = FormatTimeline(t);
  EXPECT_NE(text.find("approved by alice (once) after 3.00 s"), std::string::npos) << text;
  EXPECT_NE(text.find("decision deny  rule deny-deletes  policy v1"), std::string::npos) << text;
  EXPECT_NE(text.find("→ pending"), std::string::npos) << text;
  EXPECT_EQ(text.find("other"), std::string::npos) << "another session's calls leak into the timeline";
  // The arguments as logged, not their hash (issue 31).
  EXPECT_NE(text.find("received delete_file {\"path\":\"a\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("received echo {\"text\":\"late\"}"), std::string::npos) << text;
  EXPECT_EQ(text.find(ArgsHash({{"path", "a"}}).substr(0, 12)), std::string::npos) << text;
}

TEST(Timeline, LongArgumentsAreCutOnOneLineAtACodePoint) {
  Event e;
  e.seq = 1;
  e.type = "request.received";
  e.org_id = "o";
  e.request_id = "r1";
  e.session_id = "s1";
  e.agent_id = "a";
  e.tool = "write_file";
  std::string content;
  for (int i = 0; i < 200; ++i) content += "é\n";
  e.data = {{"request", {{"tool", "write_file"}, {"args", {{"path", "x"}, {"content", content}}}}},
            {"args_hash", std::string(64, 'a')}};
  const std::string text = FormatTimeline(BuildTimeline("s1", {e}));
  const size_t at = text.find("received write_file {\"content\":\"é\\n");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string line = text.substr(at, text.find('\n', at) - at);
  EXPECT_TRUE(line.ends_with("…")) << line;
  EXPECT_LT(line.size(), 400u) << "one bounded line";
  EXPECT_EQ(ToValidUtf8(line), line) << "cut inside a character";
}

TEST_F(ReplayLogTest, TimelineOfAnUnknownSessionIsNotFound) {
  RecordSession();
  std::vector<Event> events;
  EXPECT_EQ(ReadSession(log_->store(), "nope", &events).code(), errc::kNotFound);
}

LinkLookup LinksOf(const LogStore& store) {
  return [&store](uint64_t seq, ChainLink* out) { return ReadLink(store, seq, out); };
}

TEST_F(ReplayLogTest, SessionChainOfAnUntouchedLogHolds) {
  RecordSession();
  std::vector<Event> events;
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &events).ok());
  auto problems = CheckSessionChain(events, LinksOf(log_->store()));
  EXPECT_TRUE(problems.empty()) << problems[0].status.ToString();
}

// An event of the session edited in place: its hash no longer matches; and
// re-hashed, its successor no longer links to it.
TEST_F(ReplayLogTest, SessionChainFindsAnEditedEvent) {
  RecordSession();
  std::vector<Event> events;
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &events).ok());
  ASSERT_GT(events.size(), 3u);
  std::vector<Event> edited = events;
  edited[2].data["verdict"] = "allow";  // as if read back from an edited record
  auto problems = CheckSessionChain(edited, LinksOf(log_->store()));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].seq, edited[2].seq);
  EXPECT_EQ(problems[0].status.code(), errc::kChainBroken);

  // Re-hashed: its own link holds, the next record's does not.
  std::string body;
  ASSERT_TRUE(EncodeEventBody(edited[2], SIZE_MAX, &body).ok());
  Digest prev;
  ASSERT_TRUE(DigestFromHex(edited[2].prev_hash, &prev));
  edited[2].hash = ToHex(logfmt::ChainHash(prev, body));
  problems = CheckSessionChain(edited, LinksOf(log_->store()));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].status.message().find("does not link back"), std::string::npos)
      << problems[0].status.ToString();
}

// The same through RocksDB itself: a record rewritten behind the log's back.
TEST_F(ReplayLogTest, SessionChainFindsARecordRewrittenOnDisk) {
  RecordSession();
  std::vector<Event> events;
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &events).ok());
  const Event target = events[1];  // r1's decision
  std::string raw;
  ASSERT_TRUE(log_->store().ReadRaw(target.seq, &raw).ok());
  logfmt::RecordView rec;
  ASSERT_TRUE(logfmt::DecodeRecord(raw, &rec).ok());
  std::string body(rec.body);
  auto at = body.find("\"allow\"");
  ASSERT_NE(at, std::string::npos);
  body.replace(at, 7, "\"deny\" ");  // same length is not needed; keep it valid JSON
  body.erase(at + 6, 1);
  std::string forged = logfmt::EncodeRecord(rec.prev_hash, rec.hash, body);
  ASSERT_TRUE(log_->store()
                  .db()
                  ->Put({}, log_->store().cf(logfmt::kEvents), logfmt::EncodeSeq(target.seq), forged)
                  .ok());
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &events).ok());
  EXPECT_EQ(events[1].data["verdict"], "deny");
  auto problems = CheckSessionChain(events, LinksOf(log_->store()));
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0].seq, target.seq);
}

TEST_F(ReplayLogTest, RecordingKeysCallsBySessionToolArgsAndOrder) {
  rec_->Call("a", "s1", "echo", {{"n", 1}}, {{"out", "first"}}, kT0);
  rec_->Call("b", "s1", "echo", {{"n", 2}}, {{"out", "other args"}}, kT0 + 10);
  rec_->Call("c", "s1", "echo", {{"n", 1}}, {{"out", "second"}}, kT0 + 20);
  rec_->Call("d", "s2", "echo", {{"n", 1}}, {{"out", "s2"}}, kT0 + 30);
  rec_->Received("e", "s1", "echo", {{"n", 3}}, kT0 + 40);  // never executed: not a recorded call
  std::vector<Event> events;
  ASSERT_TRUE(ReadTypes(log_->store(), {"request.received", "execution.completed"}, 0, &events).ok());
  Recording r = Recording::FromEvents(events);
  EXPECT_EQ(r.size(), 4u);
  const CallKey k1{"s1", "echo", ArgsHash({{"n", 1}})};
  ASSERT_NE(r.Find(k1, 0), nullptr);
  EXPECT_EQ(r.Find(k1, 0)->result["data"]["out"], "first");
  EXPECT_EQ(r.Find(k1, 1)->result["data"]["out"], "second");
  EXPECT_EQ(r.Find(k1, 2), nullptr);
  EXPECT_EQ(r.Count(CallKey{"s1", "echo", ArgsHash({{"n", 3}})}), 0u);
  EXPECT_EQ(r.Find(CallKey{"s2", "echo", ArgsHash({{"n", 1}})}, 0)->request_id, "d");

  Recording only = Recording::FromEvents(events, "s2");
  EXPECT_EQ(only.size(), 1u);
  EXPECT_FALSE(only.HasSession("s1"));
  EXPECT_TRUE(only.HasSession("s2"));
}

TEST_F(ReplayLogTest, RecordingLoadsFromALogDirAndFromAVerifiedExport) {
  rec_->Call("a", "s1", "echo", {{"n", 1}}, {{"out", "first"}}, kT0);
  rec_->Call("b", "s2", "echo", {{"n", 1}}, {{"out", "s2"}}, kT0 + 10);
  const std::string file = dir_.sub("export.jsonl");
  {
    std::ofstream out(file);
    ASSERT_TRUE(ExportLog(log_->store(), {}, out).ok());
  }
  log_.reset();  // a closed log, like yesterday's
  const CallKey k{"s1", "echo", ArgsHash({{"n", 1}})};
  for (const std::string& from : {dir_.path(), dir_.sub("log"), file}) {
    Recording r;
    Status s = LoadRecording(from, "", &r);
    ASSERT_TRUE(s.ok()) << from << ": " << s.ToString();
    EXPECT_EQ(r.size(), 2u) << from;
    ASSERT_NE(r.Find(k, 0), nullptr) << from;
    EXPECT_EQ(r.Find(k, 0)->result["data"]["out"], "first");
  }
  Recording r;
  EXPECT_EQ(LoadRecording(dir_.path(), "s9", &r).code(), errc::kNotFound);
  EXPECT_EQ(LoadRecording(dir_.sub("nothing-here"), "", &r).code(), errc::kNotFound);
  // An export that does not verify is refused.
  {
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto at = text.find("\"first\"");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 7, "\"forge\"");
    std::ofstream out(file, std::ios::trunc);
    out << text;
  }
  EXPECT_EQ(LoadRecording(file, "", &r).code(), errc::kChainBroken);
}

// ---------------------------------------------------------------------------
// Re-decision and what-if, on logs whose decisions decide's engine made.

// A logged policy: echo and read_file run, deletes are denied, the rest
// asks; read_file costs $1 and a session may spend $2.50.
constexpr const char* kLoggedPolicy = R"(
version: 1
mode: ask
approval_threshold: HIGH
deny: ["delete_file:*", "*:*secret*"]
allow: [builtin:echo, builtin:read_file]
tools:
  read_file: {danger: LOW, read_only: true, cost_usd: 1}
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 2.5}
)";

PolicyPtr MustLoad(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

// Writes calls the way decide and execute do: each decision is made by the
// engine under the policy in force and the ledger folded from the events
// appended so far. `decide_under`, when set, is a policy decide used
// without the log knowing (a change that bypassed the log).
class DecidingRecorder {
 public:
  DecidingRecorder(EventLog& log, Recorder& rec) : log_(log), rec_(rec) {}

  void LoadPolicy(const PolicyPtr& p, int64_t t) {
    Event e;
    e.type = "policy.updated";
    e.id = MakeEventId(e.type, "", p->content_hash() + std::to_string(t));
    e.org_id = "org-1";
    e.time_us = t;
    e.data = {{"policy_version", p->version()},
              {"content_hash", p->content_hash()},
              {"source", p->source()},
              {"tier", "file"},
              {"policy", p->doc()}};
    Fold(e);
    rec_.Append(e);
  }
  // One call; returns the verdict decide gave.
  std::string Call(const std::string& rid, const std::string& session, const std::string& tool, Json args,
                   int64_t t, double actual_cost = 0) {
    rec_.Received(rid, session, tool, args, t);
    Json req{{"request_id", rid},     {"org_id", rec_.org}, {"agent_id", rec_.agent},
             {"session_id", session}, {"tool", tool},       {"args", args}};
    DecideInput in{&req, t};
    Json d = Decide(decide_under ? bypass_ : policy_, ledger_, in);
    d["source"] = "test";
    if (edit) edit(rid, d);
    Event de = rec_.Base("decision.made", rid, session, tool, t + 1000, d);
    Fold(de);
    rec_.Append(de);
    const std::string verdict = d["verdict"];
    if (verdict == "ask") {
      rec_.Append(rec_.Base("approval.granted", rid, session, tool, t + 2000,
                            {{"approver", "alice"}, {"scope", "once"}}, "alice"));
    }
    if (verdict != "deny") {
      Event done = rec_.Base(
          "execution.completed", rid, session, tool, t + 3000,
          {{"result", ToolResultOk({{"ok", true}}, 1)}, {"duration_ms", 1}, {"cost_usd", actual_cost}});
      Fold(done);
      rec_.Append(done);
    }
    return verdict;
  }
  void Bypass(const PolicyPtr& p) {
    decide_under = true;
    bypass_.SetFile(p);
  }
  // An "allow always" of `pattern` for the recorder's org and agent, as
  // approve writes it (approve/approve_stage.cpp, AllowAlwaysEvent).
  void AllowAlways(const std::string& rid, const std::string& pattern, int64_t t) {
    Json rule{{"agent_id", rec_.agent}, {"org_id", rec_.org}, {"allow", Json::array({pattern})}};
    std::string bytes;
    ASSERT_TRUE(CanonicalBytes(rule, &bytes).ok());
    const std::string hash = Sha256Hex(bytes);
    Event e = rec_.Base("policy.updated", rid, "s-approvals", "write_file", t,
                        {{"policy_version", "agent-rule:" + hash.substr(0, 16)},
                         {"content_hash", hash},
                         {"source", "approval:" + rid},
                         {"tier", "agent_local"},
                         {"org_id", rec_.org},
                         {"agent_id", rec_.agent},
                         {"allow", Json::array({pattern})},
                         {"approver", "alice"}},
                        "always");
    Fold(e);
    rec_.Append(e);
  }

  bool decide_under = false;
  // Edits a decision before it is logged (as if edited in the log).
  std::function<void(const std::string& rid, Json& decision)> edit;

 private:
  void Fold(const Event& e) {
    ASSERT_TRUE(policy_.Apply(e).ok());
    ledger_.Apply(e);
  }
  EventLog& log_;
  Recorder& rec_;
  PolicyInForce policy_, bypass_;
  BudgetLedger ledger_;
};

class RedecideTest : public ReplayLogTest {
 protected:
  void SetUp() override {
    ReplayLogTest::SetUp();
    dec_ = std::make_unique<DecidingRecorder>(*log_, *rec_);
  }
  // Every re-decision in these tests runs every path and requires the same
  // report: the slow one (every event decoded, decisions compared field by
  // field), the fast one over a vector (target decisions kept as the bytes
  // of their compared fields and compared with the re-made decision's bytes,
  // parsed only on a difference) and the fast one as the CLI runs it
  // (StreamDecisionInputs folded by a Redecider chunk by chunk while the
  // reader thread reads on). Returns the fast one's.
  RedecideReport Run(const Target& target, PolicyPtr candidate = nullptr) {
    std::vector<Event> events;
    Status s = ReadDecisionInputs(log_->store(), target, &events);
    EXPECT_TRUE(s.ok()) << s.ToString();
    RedecideReport slow = Redecide(events, target, RedecideOptions{candidate});
    std::vector<DecisionInput> inputs;
    s = ReadDecisionInputs(log_->store(), target, &inputs);
    EXPECT_TRUE(s.ok()) << s.ToString();
    // The same events, in the same order; bytes kept parse to the compared
    // fields of the data.
    EXPECT_EQ(inputs.size(), events.size());
    kept_as_bytes = 0;
    for (size_t i = 0; i < std::min(inputs.size(), events.size()); ++i) {
      const Event& a = inputs[i].event;
      const Event& b = events[i];
      EXPECT_EQ(a.seq, b.seq);
      EXPECT_EQ(a.type, b.type);
      EXPECT_EQ(a.request_id, b.request_id);
      EXPECT_EQ(a.session_id, b.session_id);
      EXPECT_EQ(a.agent_id, b.agent_id);
      EXPECT_EQ(a.org_id, b.org_id);
      EXPECT_EQ(a.tool, b.tool);
      EXPECT_EQ(a.time_us, b.time_us);
      if (inputs[i].compared_bytes.empty()) {
        EXPECT_EQ(a.data, b.data) << a.seq;
      } else {
        ++kept_as_bytes;
        EXPECT_EQ(a.type, "decision.made");
        Json d, want = Json::object();
        EXPECT_TRUE(ParseJson(inputs[i].compared_bytes, &d).ok());
        for (const char* const* f = kComparedFields; *f != nullptr; ++f) {
          if (b.data.contains(*f)) want[*f] = b.data[*f];
        }
        EXPECT_EQ(d, want) << a.seq;
      }
    }
    RedecideReport fast = Redecide(std::move(inputs), target, RedecideOptions{candidate});
    EXPECT_EQ(fast.ToJson(), slow.ToJson());
    EXPECT_EQ(FormatReport(fast), FormatReport(slow));
    Redecider fold(target, RedecideOptions{candidate});
    size_t chunks = 0;
    s = StreamDecisionInputs(log_->store(), target, [&](std::vector<DecisionInput>& chunk) {
      ++chunks;
      for (DecisionInput& in : chunk) fold.Fold(in);
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_GE(chunks, 1u);
    RedecideReport streamed = fold.Finish();
    EXPECT_EQ(streamed.ToJson(), slow.ToJson());
    EXPECT_EQ(FormatReport(streamed), FormatReport(slow));
    return fast;
  }
  size_t kept_as_bytes = 0;
  // A session: echo, a read of a secret (denied), a write (asks), a delete
  // (denied), then reads of $1 each until the $2.50 budget denies one.
  void RecordSession(const std::string& session, int64_t t) {
    EXPECT_EQ(dec_->Call(session + "-echo", session, "echo", {{"text", "hi"}}, t), "allow");
    EXPECT_EQ(
        dec_->Call(session + "-secret", session, "read_file", {{"path", "/srv/secret.txt"}}, t + 10'000),
        "deny");
    EXPECT_EQ(dec_->Call(session + "-write", session, "write_file", {{"path", "/srv/out"}, {"content", "x"}},
                         t + 20'000),
              "ask");
    EXPECT_EQ(dec_->Call(session + "-del", session, "delete_file", {{"path", "/srv/out"}}, t + 30'000),
              "deny");
    EXPECT_EQ(dec_->Call(session + "-read1", session, "read_file", {{"path", "/a/1"}}, t + 40'000, 1.0),
              "allow");
    EXPECT_EQ(dec_->Call(session + "-read2", session, "read_file", {{"path", "/b/2"}}, t + 50'000, 1.0),
              "allow");
    EXPECT_EQ(dec_->Call(session + "-read3", session, "read_file", {{"path", "/a/3"}}, t + 60'000, 1.0),
              "deny")
        << "the $2.50 session budget has room for two $1 reads";
  }

  std::unique_ptr<DecidingRecorder> dec_;
};

TEST_F(RedecideTest, VerifyOfAnUntouchedLogFindsNothing) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  RecordSession("s2", kT0 + 100'000);  // the same org: shares nothing but the org
  RedecideReport r = Run(Target::Session("s1"));
  EXPECT_EQ(r.decisions, 7u);
  EXPECT_TRUE(r.clean()) << FormatReport(r);
  EXPECT_EQ(r.budget_denials_recorded, 1u);
  EXPECT_EQ(r.budget_denials_redecided, 1u) << "the budget state at each decision is the log's";
  EXPECT_DOUBLE_EQ(r.spend_recorded_usd, 2.0);
  // And the session's chain holds.
  std::vector<Event> events;
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &events).ok());
  EXPECT_TRUE(CheckSessionChain(events, LinksOf(log_->store())).empty());
}

// Decisions made under a policy the log never recorded: verify names each
// decision that policy changed, and only those.
TEST_F(RedecideTest, VerifyReportsDecisionsAPolicyChangeBehindTheLogsBackAltered) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  // From here decide runs a policy that also denies echo, but the log still
  // says kLoggedPolicy is in force.
  std::string bypass = kLoggedPolicy;
  bypass.replace(bypass.find("deny: [\"delete_file:*\""), 22, "deny: [\"builtin:echo\", \"delete_file:*\"");
  dec_->Bypass(MustLoad(bypass));
  EXPECT_EQ(dec_->Call("late-echo", "s1", "echo", {{"text", "hi"}}, kT0 + 200'000), "deny");
  EXPECT_EQ(
      dec_->Call("late-write", "s1", "write_file", {{"path", "/srv/o2"}, {"content", "y"}}, kT0 + 210'000),
      "ask");
  RedecideReport r = Run(Target::Session("s1"));
  EXPECT_EQ(r.decisions, 9u);
  ASSERT_EQ(r.changes.size(), 2u) << FormatReport(r);
  // The deny itself, and the write: same verdict, but under another policy version.
  EXPECT_EQ(r.changes[0].request_id, "late-echo");
  EXPECT_EQ(r.changes[0].transition(), "deny→allow");
  EXPECT_EQ(r.changes[1].request_id, "late-write");
  EXPECT_EQ(r.changes[1].fields, std::vector<std::string>{"policy_version"});
  EXPECT_FALSE(r.clean());
}

// A decision edited in the log (with its hash recomputed) differs from what
// its policy decides.
TEST_F(RedecideTest, VerifyReportsAnEditedDecision) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  std::vector<Event> events;
  ASSERT_TRUE(ReadDecisionInputs(log_->store(), Target::Session("s1"), &events).ok());
  for (Event& e : events) {
    if (e.type == "decision.made" && e.request_id == "s1-del") e.data["verdict"] = "allow";
  }
  RedecideReport r = Redecide(events, Target::Session("s1"), {});
  ASSERT_EQ(r.changes.size(), 1u) << FormatReport(r);
  EXPECT_EQ(r.changes[0].request_id, "s1-del");
  EXPECT_EQ(r.changes[0].transition(), "allow→deny");
}

// Decisions edited before they were logged, in compared fields and in
// fields verify does not compare: the fast path (bytes) finds exactly what
// the slow path (field by field) finds (Run checks the two agree).
TEST_F(RedecideTest, FastPathFindsWhatTheSlowPathFindsOnEditedDecisions) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  dec_->edit = [](const std::string& rid, Json& d) {
    if (rid == "e-reason") d["reason"] = "edited";
    if (rid == "e-unicode") d["reason"] = "na\u00efve \"quoted\"\n\u00e9t\u00e9 \xe2\x82\xac";
    if (rid == "e-missing") d.erase("rule");
    if (rid == "e-verdict") d["verdict"] = "allow";  // a deny logged as allow
    if (rid == "e-notify") d["notify"] = Json::array({"x"});
    if (rid == "e-float") d["read_only"] = 1.5;
    // Not differences: 1 and 1.0 are equal numbers (the bytes differ);
    // checks, source and unknown fields are not compared.
    if (rid == "n-int") d["reservation"]["usd"] = 1;
    if (rid == "n-checks") {
      d["checks"] = "rewritten";
      d["source"] = "elsewhere";
    }
    if (rid == "n-extra") {
      d["aaa"] = {{"x", "\u00fc"}, {"y", Json::array({1, 2.5, nullptr, true})}};
      d["zzz"] = "tail";
    }
  };
  const int64_t t = kT0 + 1000;
  dec_->Call("ok-echo", "s1", "echo", {{"text", "hi"}}, t);
  dec_->Call("e-reason", "s1", "echo", {{"text", "hi"}}, t + 1000);
  dec_->Call("e-unicode", "s1", "read_file", {{"path", "/srv/caf\u00e9"}}, t + 2000, 1.0);
  dec_->Call("e-missing", "s1", "write_file", {{"path", "/srv/o"}, {"content", "x"}}, t + 3000);
  dec_->Call("e-verdict", "s1", "delete_file", {{"path", "/srv/o"}}, t + 4000);
  dec_->Call("e-notify", "s1", "echo", {{"text", "\u00e9\"\\"}}, t + 5000);
  dec_->Call("e-float", "s1", "echo", {{"text", "f"}}, t + 6000);
  dec_->Call("n-int", "s1", "read_file", {{"path", "/a/1"}}, t + 7000, 1.0);
  dec_->Call("n-checks", "s1", "echo", {{"text", "c"}}, t + 8000);
  dec_->Call("n-extra", "s1", "echo", {{"text", "e"}}, t + 9000);
  dec_->Call("ok-last", "s1", "read_file", {{"path", "/a/2"}}, t + 10000, 1.0);
  RedecideReport r = Run(Target::Session("s1"));
  EXPECT_EQ(r.decisions, 11u);
  EXPECT_EQ(kept_as_bytes, 11u) << "every target decision is canonical";
  std::vector<std::string> changed;
  for (const auto& c : r.changes) changed.push_back(c.request_id);
  EXPECT_EQ(changed, (std::vector<std::string>{"e-reason", "e-unicode", "e-missing", "e-verdict", "e-notify",
                                               "e-float"}))
      << FormatReport(r);
  ASSERT_EQ(r.changes.size(), 6u);
  EXPECT_EQ(r.changes[0].fields, std::vector<std::string>{"reason"});
  EXPECT_EQ(r.changes[2].fields, std::vector<std::string>{"rule"});
  EXPECT_EQ(r.changes[3].transition(), "allow→deny");
  EXPECT_EQ(r.changes[4].fields, std::vector<std::string>{"notify"});
  EXPECT_EQ(r.changes[5].fields, std::vector<std::string>{"read_only"});
  // And under a candidate, and over the agent.
  std::string candidate = kLoggedPolicy;
  candidate.replace(candidate.find("deny: [\"delete_file:*\""), 22,
                    "deny: [\"builtin:echo\", \"delete_file:*\"");
  Run(Target::Session("s1"), MustLoad(candidate));
  Target agent;
  agent.agent_id = "agent-1";
  Run(agent, MustLoad(candidate));
  Run(agent);
}

// A session long enough for the fast read to split the org's range over
// two threads, with edited decisions in both halves and another session of
// the org interleaved (its decisions count in the budget only).
TEST_F(RedecideTest, FastPathOnALongSessionReadOnTwoThreads) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  dec_->edit = [](const std::string& rid, Json& d) {
    if (rid.ends_with("7")) d["reason"] = "edited " + rid;
    if (rid.ends_with("3")) d["checks"] = Json::array();  // not compared
  };
  const char* tools[] = {"echo", "read_file", "write_file", "delete_file"};
  size_t edited = 0;
  for (int i = 0; i < 1500; ++i) {
    const std::string rid = "q" + std::to_string(i);
    const std::string session = i % 5 == 0 ? "other" : "long";
    const std::string tool = tools[i % 4];
    Json args = tool == "echo" ? Json{{"text", rid}} : Json{{"path", "/srv/" + rid}, {"content", "x"}};
    dec_->Call(rid, session, tool, args, kT0 + 1000 + i * 1000, tool == "read_file" ? 0.01 : 0);
    edited += session == "long" && rid.ends_with("7");
  }
  RedecideReport r = Run(Target::Session("long"));
  EXPECT_EQ(r.decisions, 1200u);
  EXPECT_EQ(r.changes.size(), edited) << FormatReport(r).substr(0, 2000);
  EXPECT_EQ(kept_as_bytes, 1200u);
  std::string candidate = kLoggedPolicy;
  candidate.replace(candidate.find("deny: [\"delete_file:*\""), 22,
                    "deny: [\"read_file:/srv/q1*\", \"delete_file:*\"");
  r = Run(Target::Session("long"), MustLoad(candidate));
  EXPECT_GT(r.changes.size(), 0u);
}

// The fast read takes the org's records with one iterator, stepping over
// short runs of another org's records and seeking past long ones: it reads
// exactly the events a filter over the whole log selects (every
// policy.updated of the file and the org's own agent-local ones, the org's
// ledger events, the target's requests, up to the target's last event), and
// a record an index points at but that is gone is an error, not a gap.
TEST_F(RedecideTest, FastReadTakesExactlyTheEventsTheFoldReads) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  int other = 0;
  auto other_org = [&](int n, int64_t t) {
    for (int k = 0; k < n; ++k, ++other) {
      const std::string rid = "o" + std::to_string(other);
      Event e = rec_->Base(k % 2 ? "decision.made" : "request.received", rid, "s-other", "echo", t + k,
                           k % 2 ? Json{{"verdict", "allow"}} : Json{{"request", Json::object()}});
      e.org_id = "org-2";
      e.id = MakeRequestEventId(e.org_id, e.type, rid);
      rec_->Append(e);
    }
  };
  for (int i = 0; i < 300; ++i) {
    const int64_t t = kT0 + 1000 + i * 1000;
    other_org(i % 7 == 0 ? 40 : i % 3, t);
    const std::string tool = i % 4 == 0 ? "write_file" : "echo";
    dec_->Call("c" + std::to_string(i), i % 2 ? "s1" : "s2", tool, {{"path", "/srv/x"}, {"text", "t"}},
               t + 500);
  }
  // Another org's "allow always" before the target's last event: not read.
  rec_->org = "org-2";
  dec_->AllowAlways("o-always", "builtin:write_file", kT0 + 150'000);
  rec_->org = "org-1";
  other_org(50, kT0 + 400'000);  // after the target's last event: not read
  const Target target = Target::Session("s1");
  std::vector<Event> events;
  ASSERT_TRUE(ReadDecisionInputs(log_->store(), target, &events).ok());
  std::vector<Event> s1;
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &s1).ok());
  const uint64_t max_seq = s1.back().seq;
  std::vector<uint64_t> want, got;
  ASSERT_TRUE(ScanAll(log_->store(), [&](const Event& e) {
                if (e.seq > max_seq) return false;
                const bool ledger = e.type == "decision.made" || e.type == "execution.completed" ||
                                    e.type == "approval.denied" || e.type == "approval.expired";
                const bool policy = e.type == "policy.updated" &&
                                    (e.data.value("tier", "file") == "file" || e.org_id == "org-1");
                if (policy || (e.org_id == "org-1" &&
                               (ledger || (e.type == "request.received" && target.Matches(e))))) {
                  want.push_back(e.seq);
                }
                return true;
              }).ok());
  for (const Event& e : events) got.push_back(e.seq);
  EXPECT_EQ(got, want);
  RedecideReport r = Run(target);
  EXPECT_EQ(r.decisions, 150u);
  EXPECT_TRUE(r.clean()) << FormatReport(r).substr(0, 2000);

  // A record of the org gone from under its index.
  const uint64_t gone = want[want.size() / 2];
  ASSERT_TRUE(
      log_->store().db()->Delete({}, log_->store().cf(logfmt::kEvents), logfmt::EncodeSeq(gone)).ok());
  Status st = ReadDecisionInputs(log_->store(), target, &events);
  EXPECT_EQ(st.code(), errc::kLogCorrupt);
  EXPECT_NE(st.message().find("seq " + std::to_string(gone) + " which cannot be read"), std::string::npos)
      << st.ToString();
  size_t handed = 0;
  st = StreamDecisionInputs(log_->store(), target, [&](std::vector<DecisionInput>& chunk) {
    for (const DecisionInput& in : chunk) EXPECT_LT(in.event.seq, gone);
    handed += chunk.size();
  });
  EXPECT_EQ(st.code(), errc::kLogCorrupt);
}

// Two orgs in one log under one policy file, org-2 with a section of its
// own: the same session id and the same request ids in both, each org's
// budget counted apart, an "allow always" in org-2 between decisions. Every
// decision re-decides byte for byte, per org and both together; org-1's
// decisions carry org-1's version before and after org-2's changes, and
// org-1's re-decision reads nothing of org-2's.
TEST_F(RedecideTest, VerifyOfAMixedTwoOrgLogIsCleanAndEachOrgKeepsItsOwnVersion) {
  const PolicyPtr policy =
      MustLoad(std::string(kLoggedPolicy) + "orgs:\n  org-2:\n    notify: [\"builtin:echo\"]\n");
  dec_->LoadPolicy(policy, kT0);
  RecordSession("s1", kT0 + 1000);  // org-1
  rec_->org = "org-2";
  RecordSession("s1", kT0 + 100'000);  // the same request ids, another org: another budget
  dec_->AllowAlways("o2-grant", "builtin:write_file", kT0 + 190'000);
  EXPECT_EQ(dec_->Call("s1-tail", "s1", "write_file", {{"path", "/srv/t"}}, kT0 + 200'000), "allow")
      << "org-2's allow always";
  rec_->org = "org-1";
  EXPECT_EQ(dec_->Call("s1-tail", "s1", "write_file", {{"path", "/srv/t"}}, kT0 + 210'000), "ask")
      << "org-2's allow always is not org-1's";

  // The recorded versions: org-1's is its own, unmoved by org-2.
  std::map<std::string, std::set<std::string>> versions;
  ASSERT_TRUE(ScanAll(log_->store(), [&](const Event& e) {
                if (e.type == "decision.made") versions[e.org_id].insert(e.data.value("policy_version", ""));
                return true;
              }).ok());
  EXPECT_EQ(versions["org-1"], std::set<std::string>{policy->version("org-1")});
  EXPECT_NE(policy->version("org-1"), policy->version("org-2"));
  EXPECT_EQ(versions["org-2"].size(), 2u) << "org-2's, then org-2's +local";
  EXPECT_EQ(versions["org-2"].count(policy->version("org-2")), 1u);

  Target org1 = Target::Session("s1");
  org1.org_id = "org-1";
  RedecideReport r1 = Run(org1);
  EXPECT_EQ(r1.decisions, 8u);
  EXPECT_TRUE(r1.clean()) << FormatReport(r1);
  EXPECT_EQ(r1.budget_denials_redecided, 1u);
  Target org2 = Target::Session("s1");
  org2.org_id = "org-2";
  RedecideReport r2 = Run(org2);
  EXPECT_EQ(r2.decisions, 8u);
  EXPECT_TRUE(r2.clean()) << FormatReport(r2);
  EXPECT_EQ(r2.budget_denials_redecided, 1u);
  RedecideReport both = Run(Target::Session("s1"));  // an operator's view: both orgs
  EXPECT_EQ(both.decisions, 16u);
  EXPECT_TRUE(both.clean()) << FormatReport(both);

  // The operator's timeline of the session: two orgs' requests with one id
  // are two requests.
  std::vector<Event> session;
  ASSERT_TRUE(ReadSession(log_->store(), "s1", &session).ok());
  const SessionTimeline timeline = BuildTimeline("s1", session);
  ASSERT_EQ(timeline.requests.size(), 16u);
  std::set<std::pair<std::string, std::string>> keys;
  for (const auto& r : timeline.requests) keys.emplace(r.org_id, r.request_id);
  EXPECT_EQ(keys.size(), 16u);
  EXPECT_EQ(keys.count({"org-2", "s1-echo"}), 1u);
  EXPECT_EQ(keys.count({"org-1", "s1-echo"}), 1u);

  // org-1's inputs hold nothing of org-2 (its "allow always" included),
  // and the report counts exactly those.
  std::vector<Event> inputs;
  ASSERT_TRUE(ReadDecisionInputs(log_->store(), org1, &inputs).ok());
  for (const Event& e : inputs) EXPECT_NE(e.org_id, "org-2") << e.type << " at seq " << e.seq;
  EXPECT_EQ(r1.events, inputs.size());
  // The pure fold skips another org's events it is handed, uncounted: the
  // report is the same with org-2's agent-local rule in the input.
  std::vector<Event> with_other = inputs;
  ASSERT_TRUE(ScanAll(log_->store(), [&](const Event& e) {
                if (e.type == "policy.updated" && e.org_id == "org-2") with_other.push_back(e);
                return true;
              }).ok());
  ASSERT_GT(with_other.size(), inputs.size());
  EXPECT_EQ(Redecide(with_other, org1, {}).ToJson(), Redecide(inputs, org1, {}).ToJson());
}

TEST_F(RedecideTest, DecisionsWithNoPolicyInTheLogAreReportedNotGuessed) {
  rec_->Call("r1", "s1", "echo", {{"text", "hi"}}, {{"text", "hi"}},
             kT0);  // slice-era decision, no policy.updated
  RedecideReport r = Run(Target::Session("s1"));
  EXPECT_EQ(r.decisions, 0u);
  ASSERT_EQ(r.not_redecided.size(), 1u);
  EXPECT_NE(r.not_redecided[0].note.find("no policy.updated"), std::string::npos);
  EXPECT_FALSE(r.clean());
}

TEST_F(RedecideTest, WhatIfAllowToDenyAndDenyToAllow) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  // Candidate: echo denied; secrets no longer denied; deletes allowed.
  const std::string candidate = R"(
version: 2
mode: ask
approval_threshold: HIGH
deny: ["builtin:echo"]
allow: [builtin:read_file, builtin:delete_file]
tools:
  read_file: {danger: LOW, read_only: true, cost_usd: 1}
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 2.5}
)";
  RedecideReport r = Run(Target::Session("s1"), MustLoad(candidate));
  EXPECT_TRUE(r.what_if);
  std::map<std::string, std::string> got;
  for (const auto& c : r.changes) got[c.request_id] = c.transition();
  EXPECT_EQ(got["s1-echo"], "allow→deny");
  EXPECT_EQ(got["s1-del"], "deny→allow");
  // The secret read is allowed now, and costs $1: with read1 and read2 the
  // budget is then full, so read2 (the second $1 read after it) is denied.
  EXPECT_EQ(got["s1-secret"], "deny→allow");
  EXPECT_EQ(got["s1-read2"], "allow→deny") << FormatReport(r);
  EXPECT_EQ(got.count("s1-read3"), 0u) << "denied before (budget), denied now (budget)";
  EXPECT_EQ(got.count("s1-write"), 0u) << "still asks";
  EXPECT_EQ(r.transitions["allow→deny"], 2u);
  EXPECT_EQ(r.transitions["deny→allow"], 2u);
  EXPECT_DOUBLE_EQ(r.spend_avoided_usd, 1.0) << "read2 ran for $1 and would not have";
  if (std::getenv("REPLAY_TEST_PRINT"))
    std::cout << FormatReport(r) << r.ToJson().dump(1).substr(0, 1500) << "\n";
}

TEST_F(RedecideTest, WhatIfAskBecomesAllowAndAllowBecomesAsk) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  const std::string candidate = R"(
version: 3
mode: ask
approval_threshold: HIGH
deny: ["delete_file:*", "*:*secret*"]
allow: [builtin:read_file, builtin:write_file]
rules:
  - {name: echo-asks, tool: echo, verdict: ask}
tools:
  echo: {danger: MEDIUM, read_only: false}
  read_file: {danger: LOW, read_only: true, cost_usd: 1}
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 2.5}
)";
  RedecideReport r = Run(Target::Session("s1"), MustLoad(candidate));
  std::map<std::string, std::string> got;
  for (const auto& c : r.changes) got[c.request_id] = c.transition();
  EXPECT_EQ(got["s1-write"], "ask→allow") << FormatReport(r);
  EXPECT_EQ(got["s1-echo"], "allow→ask") << FormatReport(r);
  EXPECT_EQ(r.changes.size(), 2u) << FormatReport(r);
}

// The counterfactual ledger: a call the candidate denies frees its budget
// for the calls after it.
TEST_F(RedecideTest, WhatIfBudgetEffect) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  std::string candidate = kLoggedPolicy;
  candidate.replace(candidate.find("deny: [\"delete_file:*\""), 22,
                    "deny: [\"read_file:/b/*\", \"delete_file:*\"");
  RedecideReport r = Run(Target::Session("s1"), MustLoad(candidate));
  ASSERT_EQ(r.changes.size(), 2u) << FormatReport(r);
  EXPECT_EQ(r.changes[0].request_id, "s1-read2");
  EXPECT_EQ(r.changes[0].transition(), "allow→deny");
  EXPECT_TRUE(r.changes[0].executed);
  EXPECT_EQ(r.changes[1].request_id, "s1-read3");
  EXPECT_EQ(r.changes[1].transition(), "deny→allow") << "read2's dollar is not spent, so read3 fits";
  EXPECT_EQ(r.changes[1].recorded["error_code"], errc::kBudgetExceeded);
  EXPECT_DOUBLE_EQ(r.spend_avoided_usd, 1.0);
  EXPECT_DOUBLE_EQ(r.newly_allowed_reserved_usd, 1.0);
  EXPECT_EQ(r.budget_denials_recorded, 1u);
  EXPECT_EQ(r.budget_denials_redecided, 0u);
  Json j = r.ToJson();
  EXPECT_EQ(j["budget"]["spend_avoided_usd"], 1.0);
  EXPECT_EQ(j["transitions"]["deny→allow"], 1);
}

// Across sessions: an agent over a time range.
TEST_F(RedecideTest, WhatIfOverAnAgentsSessionsInATimeRange) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  RecordSession("s2", kT0 + 1'000'000);
  RecordSession("s3", kT0 + 2'000'000);
  std::string candidate = kLoggedPolicy;
  candidate.replace(candidate.find("deny: [\"delete_file:*\""), 22,
                    "deny: [\"builtin:echo\", \"delete_file:*\"");
  Target t;
  t.agent_id = "agent-1";
  t.since_us = kT0 + 1'000'000;  // s2 and s3
  RedecideReport r = Run(t, MustLoad(candidate));
  ASSERT_EQ(r.changes.size(), 2u) << FormatReport(r);
  EXPECT_EQ(r.changes[0].session_id, "s2");
  EXPECT_EQ(r.changes[1].session_id, "s3");
  EXPECT_EQ(r.decisions, 14u);
  t.until_us = kT0 + 2'000'000;  // s2 only
  r = Run(t, MustLoad(candidate));
  ASSERT_EQ(r.changes.size(), 1u);
  EXPECT_EQ(r.changes[0].request_id, "s2-echo");
}

// ---------------------------------------------------------------------------
// The CLI on a closed log: exit codes and output.

struct CliResult {
  int code = -1;
  std::string out;
};

CliResult Tollgate(const std::string& args) {
  testing::CommandResult c = testing::RunCommand(std::string(TOLLGATE_BIN) + " " + args + " 2>&1");
  return {c.exit_code, std::move(c.out)};
}

TEST_F(RedecideTest, CliTimelineVerifyAndWhatIf) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  RecordSession("s2", kT0 + 1'000'000);
  std::string bypass = kLoggedPolicy;
  bypass.replace(bypass.find("deny: [\"delete_file:*\""), 22, "deny: [\"builtin:echo\", \"delete_file:*\"");
  dec_->Bypass(MustLoad(bypass));
  dec_->Call("s2-late", "s2", "echo", {{"text", "late"}}, kT0 + 2'000'000);
  log_.reset();  // closed, as a log copied off a server
  const std::string data = " --data " + dir_.path();
  {
    std::ofstream out(dir_.sub("candidate.yaml"));
    out << bypass;
  }

  CliResult t = Tollgate("replay s1" + data);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("#7 s1-read3  read_file  → denied"), std::string::npos) << t.out;
  t = Tollgate("replay s1 --json" + data);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(Json::parse(t.out)["requests"].size(), 7u);

  CliResult v = Tollgate("replay s1 --verify" + data);
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("every hash and both links hold"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("7 decisions re-decided, 0 differ"), std::string::npos) << v.out;
  v = Tollgate("replay s2 --verify --json" + data);
  EXPECT_EQ(v.code, 1) << v.out;
  Json vj = Json::parse(v.out);
  ASSERT_EQ(vj["verify"]["changes"].size(), 1u) << v.out;
  EXPECT_EQ(vj["verify"]["changes"][0]["request_id"], "s2-late");
  EXPECT_TRUE(vj["chain"]["ok"]);

  CliResult w = Tollgate("replay s1 --json --policy " + dir_.sub("candidate.yaml") + data);
  EXPECT_EQ(w.code, 0) << w.out;
  Json wj = Json::parse(w.out)["what_if"];
  EXPECT_EQ(wj["transitions"]["allow→deny"], 1) << w.out;
  EXPECT_EQ(wj["changes"][0]["request_id"], "s1-echo");

  CliResult a = Tollgate("replay --agent agent-1 --policy " + dir_.sub("candidate.yaml") + data);
  EXPECT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("session s1: 7 decisions, 1 change verdict"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("session s2: 8 decisions, 1 change verdict"), std::string::npos) << a.out;

  EXPECT_EQ(Tollgate("replay nope" + data).code, 2);
  EXPECT_EQ(Tollgate("replay s1 --org org-9" + data).code, 2) << "no event of s1 in that org";
  CliResult o1 = Tollgate("replay s1 --verify --org org-1" + data);
  EXPECT_EQ(o1.code, 0) << o1.out;
  EXPECT_NE(o1.out.find("7 decisions re-decided, 0 differ"), std::string::npos) << o1.out;
  EXPECT_EQ(Tollgate("replay --agent agent-1" + data).code, 2) << "--agent needs --policy or --verify";
  EXPECT_EQ(Tollgate("replay s1 --policy " + dir_.sub("missing.yaml") + data).code, 2);
}

// The HTTP API runs what `tollgate replay` runs (replay/from_log.h), over
// the live log, and shows a caller its own org alone: here org-2 uses the
// same session id as org-1.
TEST_F(RedecideTest, HttpReplayServesTimelineVerifyAndWhatIfWithinTheCallersOrg) {
  dec_->LoadPolicy(MustLoad(kLoggedPolicy), kT0);
  RecordSession("s1", kT0 + 1000);
  RecordSession("s2", kT0 + 1'000'000);
  rec_->org = "org-2";
  EXPECT_EQ(dec_->Call("o2-r1", "s1", "echo", {{"text", "other org"}}, kT0 + 1'500'000), "allow");
  rec_->org = "org-1";
  // The session's first and last events are org-1's: org-2's are inside.
  EXPECT_EQ(dec_->Call("s1-tail", "s1", "echo", {{"text", "tail"}}, kT0 + 1'600'000), "allow");
  std::string bypass = kLoggedPolicy;
  bypass.replace(bypass.find("deny: [\"delete_file:*\""), 22, "deny: [\"builtin:echo\", \"delete_file:*\"");
  dec_->Bypass(MustLoad(bypass));
  dec_->Call("s2-late", "s2", "echo", {{"text", "late"}}, kT0 + 2'000'000);

  std::unique_ptr<EmbeddedBroker> broker;
  ASSERT_TRUE(EmbeddedBroker::Start(1, &broker).ok());
  ApiOptions o;
  o.bus.brokers = broker->bootstrap();
  const std::string tokens = dir_.sub("tokens.json");
  std::map<std::string, std::string> token;
  for (const auto& [name, who] :
       std::vector<std::pair<std::string, Principal>>{{"auditor1", {"aud-1", "org-1", {"auditor"}}},
                                                      {"auditor2", {"aud-2", "org-2", {"auditor"}}},
                                                      {"auditor3", {"aud-3", "org-3", {"auditor"}}},
                                                      {"approver1", {"app-1", "org-1", {"approver"}}},
                                                      {"admin", {"root", "*", {"admin"}}}}) {
    ASSERT_TRUE(AddToken(tokens, who, &token[name]).ok());
  }
  ASSERT_TRUE(TokenStore::Load(tokens, &o.tokens).ok());
  std::unique_ptr<ApiServer> api;
  ASSERT_TRUE(ApiServer::Start(std::move(o), log_->store(), &api).ok());
  httplib::Client http("127.0.0.1", api->port());
  auto as = [&](const std::string& who) {
    return httplib::Headers{{"Authorization", "Bearer " + token[who]}};
  };
  auto code_of = [](const httplib::Result& r) { return Json::parse(r->body)["error"].value("code", ""); };
  auto request_ids = [](const Json& timeline) {
    std::set<std::string> ids;
    for (const auto& r : timeline["requests"]) ids.insert(r["request_id"].get<std::string>());
    return ids;
  };

  // The timeline: each org sees its own requests of "s1".
  auto t1 = http.Get("/v1/replay/sessions/s1", as("auditor1"));
  ASSERT_TRUE(t1);
  ASSERT_EQ(t1->status, 200) << t1->body;
  const std::set<std::string> mine = request_ids(Json::parse(t1->body)["timeline"]);
  EXPECT_EQ(mine.size(), 8u);
  EXPECT_EQ(mine.count("o2-r1"), 0u) << "another org's request of the same session id";
  auto t2 = http.Get("/v1/replay/sessions/s1", as("auditor2"));
  ASSERT_EQ(t2->status, 200) << t2->body;
  EXPECT_EQ(request_ids(Json::parse(t2->body)["timeline"]), std::set<std::string>{"o2-r1"});
  auto all = http.Get("/v1/replay/sessions/s1", as("admin"));
  ASSERT_EQ(all->status, 200) << all->body;
  EXPECT_EQ(request_ids(Json::parse(all->body)["timeline"]).size(), 9u);
  auto admin_verify = http.Get("/v1/replay/sessions/s1/verify", as("admin"));
  ASSERT_EQ(admin_verify->status, 200) << admin_verify->body;
  EXPECT_EQ(Json::parse(admin_verify->body)["verify"]["decisions"], 9)
      << "both orgs' requests of the session";
  EXPECT_TRUE(Json::parse(admin_verify->body)["clean"]) << admin_verify->body;
  auto admin_org2 = http.Get("/v1/replay/sessions/s1?org=org-2", as("admin"));
  EXPECT_EQ(request_ids(Json::parse(admin_org2->body)["timeline"]), std::set<std::string>{"o2-r1"});

  // Refusals: another org named, a role without audit, no token, a session
  // that does not exist or not in the caller's org (not disclosed).
  auto cross = http.Get("/v1/replay/sessions/s1?org=org-2", as("auditor1"));
  EXPECT_EQ(cross->status, 403);
  EXPECT_EQ(code_of(cross), "E_FORBIDDEN");
  EXPECT_EQ(http.Get("/v1/replay/sessions/s1", as("approver1"))->status, 403);
  EXPECT_EQ(http.Get("/v1/replay/sessions/s1")->status, 401);
  auto nope = http.Get("/v1/replay/sessions/nope", as("auditor1"));
  EXPECT_EQ(nope->status, 404);
  EXPECT_EQ(code_of(nope), "E_NOT_FOUND");
  auto elsewhere = http.Get("/v1/replay/sessions/s1", as("auditor3"));
  EXPECT_EQ(elsewhere->status, 404);
  auto also_nope = http.Get("/v1/replay/sessions/nope", as("auditor3"));
  std::string used_elsewhere = elsewhere->body, unused = also_nope->body;
  used_elsewhere.replace(used_elsewhere.find("'s1'"), 4, "'nope'");
  EXPECT_EQ(used_elsewhere, unused) << "a session other orgs use looks like one nobody uses";
  EXPECT_EQ(http.Get("/v1/replay/sessions/s1/verify", as("auditor3"))->status, 404);

  // Verify: the chain over the org's events of the session and every
  // decision re-made; s2's last decision was made behind the log's back.
  auto v1 = http.Get("/v1/replay/sessions/s1/verify", as("auditor1"));
  ASSERT_EQ(v1->status, 200) << v1->body;
  Json vj = Json::parse(v1->body);
  EXPECT_TRUE(vj["clean"]) << v1->body;
  EXPECT_TRUE(vj["chain"]["ok"]);
  size_t org1_s1 = 0;
  ASSERT_TRUE(ScanAll(log_->store(), [&](const Event& e) {
                org1_s1 += e.session_id == "s1" && e.org_id == "org-1";
                return true;
              }).ok());
  EXPECT_GT(org1_s1, 16u);
  EXPECT_EQ(vj["chain"]["events"], org1_s1);
  EXPECT_EQ(vj["verify"]["decisions"], 8);
  EXPECT_EQ(vj["verify"]["changed"], 0);
  auto v_org2 = http.Get("/v1/replay/sessions/s1/verify", as("auditor2"));
  ASSERT_EQ(v_org2->status, 200) << v_org2->body;
  EXPECT_EQ(Json::parse(v_org2->body)["verify"]["decisions"], 1);
  auto v2 = http.Get("/v1/replay/sessions/s2/verify", as("auditor1"));
  ASSERT_EQ(v2->status, 200) << v2->body;
  Json v2j = Json::parse(v2->body);
  EXPECT_FALSE(v2j["clean"]);
  ASSERT_EQ(v2j["verify"]["changes"].size(), 1u) << v2->body;
  EXPECT_EQ(v2j["verify"]["changes"][0]["request_id"], "s2-late");

  // What-if: the candidate policy is the body.
  auto w = http.Post("/v1/replay/sessions/s1/what-if", as("auditor1"), bypass, "application/yaml");
  ASSERT_EQ(w->status, 200) << w->body;
  Json wj = Json::parse(w->body)["what_if"];
  EXPECT_EQ(wj["transitions"]["allow→deny"], 2) << w->body;
  EXPECT_EQ(wj["changes"][0]["request_id"], "s1-echo");
  EXPECT_EQ(wj["changes"][1]["request_id"], "s1-tail");
  auto wa = http.Post("/v1/replay/what-if?agent=agent-1", as("auditor1"), bypass, "application/yaml");
  ASSERT_EQ(wa->status, 200) << wa->body;
  Json waj = Json::parse(wa->body)["what_if"];
  EXPECT_EQ(waj["sessions"]["s1"]["decisions"], 8) << wa->body;
  EXPECT_EQ(waj["sessions"]["s2"]["decisions"], 8) << wa->body;
  EXPECT_EQ(waj["sessions"]["s1"]["changed"], 2);
  auto since = http.Post("/v1/replay/what-if?agent=agent-1&since=" +
                             httplib::detail::encode_query_param(FormatTime(kT0 + 900'000)),
                         as("auditor1"), bypass, "application/yaml");
  ASSERT_EQ(since->status, 200) << since->body;
  Json since_j = Json::parse(since->body)["what_if"]["sessions"];
  EXPECT_EQ(since_j["s1"]["decisions"], 1) << "only s1-tail is after since: " << since->body;
  EXPECT_EQ(since_j["s2"]["decisions"], 8);
  auto bad_policy =
      http.Post("/v1/replay/sessions/s1/what-if", as("auditor1"), "rules: [", "application/yaml");
  EXPECT_EQ(bad_policy->status, 400);
  EXPECT_EQ(code_of(bad_policy), "E_POLICY_INVALID");
  auto no_policy = http.Post("/v1/replay/sessions/s1/what-if", as("auditor1"), "", "application/yaml");
  EXPECT_EQ(no_policy->status, 400);
  EXPECT_EQ(http.Post("/v1/replay/what-if", as("auditor1"), bypass, "application/yaml")->status, 400)
      << "no agent";
  EXPECT_EQ(http.Post("/v1/replay/what-if?agent=agent-1&since=yesterday", as("auditor1"), bypass,
                      "application/yaml")
                ->status,
            400);
  auto huge = http.Post("/v1/replay/sessions/s1/what-if", as("auditor1"),
                        std::string(kMaxApiBodyBytes + 1, '#'), "application/yaml");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 413);
  EXPECT_EQ(code_of(huge), "E_BODY_TOO_LARGE");
  auto unknown = http.Get("/v1/replay/nothing-here", as("auditor1"));
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(code_of(unknown), "E_NOT_FOUND");

  // Replays past the server's limit are refused, not queued behind
  // approvals (a limit of 0 refuses every one).
  ApiOptions busy;
  busy.bus.brokers = broker->bootstrap();
  busy.max_concurrent_replays = 0;
  ASSERT_TRUE(TokenStore::Load(tokens, &busy.tokens).ok());
  std::unique_ptr<ApiServer> full;
  ASSERT_TRUE(ApiServer::Start(std::move(busy), log_->store(), &full).ok());
  httplib::Client http_full("127.0.0.1", full->port());
  for (const auto& r :
       {http_full.Get("/v1/replay/sessions/s1", as("auditor1")),
        http_full.Get("/v1/replay/sessions/s1/verify", as("auditor1")),
        http_full.Post("/v1/replay/sessions/s1/what-if", as("auditor1"), bypass, "application/yaml")}) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(code_of(r), "E_BUSY");
  }
  EXPECT_EQ(http_full.Get("/v1/audit?session=s1", as("auditor1"))->status, 200)
      << "other endpoints are not limited";
}

// The canonical scan: what it accepts parses, and the subset it cuts is the
// canonical form of those fields.
TEST(CanonicalScanTest, SubsetIsTheCanonicalBytesOfTheFieldsAlone) {
  const char* const keys[] = {"b", "d", "zz", nullptr};
  Json v = {
      {"a", {{"x", Json::array({1, -2.5e-7, "s\"\\\n\u00e9"})}}},
      {"b", "caf\u00e9 \u20ac \xf0\x9f\x98\x80 \t\x01"},
      {"c", nullptr},
      {"d", {{"usd", 0.001}, {"n", 18446744073709551615ull}, {"neg", -9223372036854775807ll}, {"f", false}}},
      {"e", Json::array()},
      {"f", Json::object()}};
  std::string text, sub, want;
  ASSERT_TRUE(CanonicalBytes(v, &text).ok());
  ASSERT_TRUE(CanonicalSubset(text, keys, &sub)) << text;
  ASSERT_TRUE(CanonicalBytes(Json{{"b", v["b"]}, {"d", v["d"]}}, &want).ok());
  EXPECT_EQ(sub, want);
  std::vector<CanonicalMember> m;
  ASSERT_TRUE(ScanCanonicalObject(text, &m));
  EXPECT_EQ(m.size(), 6u);
  EXPECT_TRUE(ScanCanonicalObject("{}", &m));
  EXPECT_TRUE(CanonicalSubset("{\"a\":1}", keys, &sub));
  EXPECT_EQ(sub, "{}");
}

TEST(CanonicalScanTest, RefusesWhatIsNotPlainCanonicalJson) {
  std::vector<CanonicalMember> m;
  for (const char* bad : {"",
                          "{",
                          "}",
                          "[]",
                          "{\"a\":1,}",
                          "{\"b\":1,\"a\":2}",
                          "{\"a\":1,\"a\":2}",
                          "{ \"a\":1}",
                          "{\"a\": 1}",
                          "{\"a\":01}",
                          "{\"a\":1.}",
                          "{\"a\":.5}",
                          "{\"a\":-}",
                          "{\"a\":1e}",
                          "{\"a\":1e400}",
                          "{\"a\":tru}",
                          "{\"a\":\"x}",
                          "{\"a\":\"\\x\"}",
                          "{\"a\":\"\\ud800\"}",
                          "{\"a\":\"\xc3\"}",
                          "{\"a\":\"\xc0\xaf\"}",
                          "{\"a\":\"\xed\xa0\x80\"}",
                          "{\"a\":\"\x01\"}",
                          "{\"a\":[1,]}",
                          "{\"a\":[1 2]}",
                          "{\"a\":1}x",
                          "{\"\\u0061\":1}",
                          "{\"a\":{\"b\":}}",
                          "{\"a\":1}\n"}) {
    EXPECT_FALSE(ScanCanonicalObject(bad, &m)) << bad;
  }
  std::string deep(100, '[');
  EXPECT_FALSE(ScanCanonicalObject("{\"a\":" + deep + std::string(100, ']') + "}", &m));
}

// Mutations of a decision's canonical bytes: whatever the scan accepts
// parses, and its subset parses to those fields of the parsed whole.
TEST(CanonicalScanTest, WhatItAcceptsParsesToTheSameFields) {
  Json d = {{"verdict", "allow"},
            {"reason", "r \"q\" \u00e9"},
            {"rule", "allow[0]"},
            {"danger_level", "LOW"},
            {"policy_version", "file:0123"},
            {"reservation", {{"usd", 1.5}, {"received_at", "t"}, {"budgets", {"b"}}}},
            {"invocation", "builtin:echo"},
            {"read_only", true},
            {"checks", Json::array({{{"check", "deny"}}})},
            {"source", "decide"},
            {"notify", {"n*"}}};
  std::string bases[2];
  ASSERT_TRUE(CanonicalBytes(d, &bases[0]).ok());
  d["reason"] = "r q \u00e9";  // no escape: the builder takes it
  ASSERT_TRUE(CanonicalBytes(d, &bases[1]).ok());
  std::mt19937 rng(7);
  const std::string alphabet = "{}[],:\"\\0123456789.-+eEtrufalsn \x01\x80\xc3\xa9u";
  size_t accepted = 0, built_ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string t = bases[i % 2];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      const size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0:
          t[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          t.erase(at, 1);
          break;
        default:
          t.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    Json built;
    if (ParseCanonicalObject(t, &built)) {
      ++built_ok;
      Json parsed;
      ASSERT_TRUE(ParseJson(t, &parsed).ok()) << t;
      EXPECT_EQ(built.dump(), parsed.dump()) << t;  // dump: number types too (1 vs 1.0)
    }
    std::string sub;
    if (!CanonicalSubset(t, kComparedFields, &sub)) continue;
    ++accepted;
    Json whole, part;
    ASSERT_TRUE(ParseJson(t, &whole).ok()) << t;
    ASSERT_TRUE(ParseJson(sub, &part).ok()) << sub;
    Json want = Json::object();
    for (const char* const* f = kComparedFields; *f != nullptr; ++f) {
      if (whole.contains(*f)) want[*f] = whole[*f];
    }
    EXPECT_EQ(part, want) << t;
  }
  EXPECT_GT(accepted, 100u);
  EXPECT_GT(built_ok, 100u);
}

// The builder gives the value (and number types) ParseJson gives, and
// leaves escapes, unsorted keys at any depth and anything the scan refuses
// to ParseJson.
TEST(CanonicalScanTest, ParseCanonicalObjectBuildsWhatParseJsonBuilds) {
  for (const char* ok :
       {"{}", "{\"a\":1}", "{\"a\":-0,\"b\":0,\"c\":-7,\"d\":123456789012345678}",
        "{\"a\":1234567890123456789012,\"b\":-9223372036854775809,\"c\":18446744073709551615}",
        "{\"a\":1.5,\"b\":-2.5e-7,\"c\":1E+2,\"d\":0.1,\"e\":1.0}",
        "{\"a\":[],\"b\":{},\"c\":[1,\"x\",null,true,false,{\"k\":[{}]}]}",
        "{\"a\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
        "{\"request\":{\"args\":{\"content\":\"xx\",\"path\":\"/p\"},\"tool\":\"echo\"}}"}) {
    Json built, parsed;
    ASSERT_TRUE(ParseCanonicalObject(ok, &built)) << ok;
    ASSERT_TRUE(ParseJson(ok, &parsed).ok()) << ok;
    EXPECT_EQ(built.dump(), parsed.dump()) << ok;
  }
  Json j;
  for (const char* refused : {"{\"a\":\"\\n\"}", "{\"a\":{\"b\":1,\"a\":2}}", "{\"a\":{\"b\":1,\"b\":2}}",
                              "{\"b\":1,\"a\":2}", "{\"a\":1} ", "[1]", "{\"a\":01}"}) {
    EXPECT_FALSE(ParseCanonicalObject(refused, &j)) << refused;
  }
}

// The re-made decision's compared bytes written straight from the Decision
// are CanonicalBytes of those fields of Decision::ToJson(), and the ledger
// entry the Decision makes is the one its JSON makes: on decisions of every
// verdict, with and without reservations (whole and fractional dollars),
// approvals (approvers, quorum, timeouts), error codes, notify, agent-local
// rules, and strings that need escaping.
TEST(DecisionBytesTest, AreTheCanonicalBytesOfTheComparedFields) {
  constexpr const char* kPolicy = R"(
version: 1
mode: ask
approval_threshold: HIGH
deny: ["delete_file:*", "*:*secret*"]
allow: [builtin:echo, builtin:read_file]
notify: ["builtin:echo", "write_file:*"]
approvals:
  default: {quorum: 2, approvers: [alice, "b\u00e9a"], timeout_s: 60}
rules:
  - {name: "no \"tmp\"", tool: write_file, verdict: deny, when: {file_prefix: /tmp}, reason: "tmp \u00e9\n\ttab"}
tools:
  read_file: {danger: LOW, read_only: true, cost_usd: 0.25}
  fetch: {danger: MEDIUM, read_only: true, cost_usd: 1}
  weird: {danger: HIGH, cost_usd: 0.000001}
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 3}
  - {name: "calls", scope: agent, window: hour, max_calls: 40}
)";
  PolicyPtr p = MustLoad(kPolicy);
  PolicyInForce pif;
  pif.SetFile(p);
  ASSERT_TRUE(pif.AddAgentLocal("org-1", "agent-1", {"cli:dep\\*"}, "h1").ok());
  BudgetLedger ledger, by_json, by_struct;
  const char* tools[] = {"echo",  "read_file", "write_file", "delete_file",  "fetch",
                         "weird", "nope",      "cli:dep*",   "http_request", "execute_command"};
  std::set<std::string> seen;
  Decision d;
  for (int i = 0; i < 200; ++i) {
    const std::string tool = tools[i % 10];
    const std::string rid = "r" + std::to_string(i);
    Json args = {{"path", i % 3 == 0   ? "/tmp/x"
                          : i % 3 == 1 ? "/srv/secret"
                                       : "/srv/caf\u00e9 \"q\""},
                 {"text", "t\x01"},
                 {"url", "https://example.com/a"},
                 {"method", i % 2 ? "POST" : "GET"},
                 {"command", "ls -l"}};
    Json req{{"request_id", rid},
             {"org_id", "org-1"},
             {"agent_id", i % 5 ? "agent-1" : "agent-\u00e9"},
             {"session_id", i % 4 ? "s1" : "s2"},
             {"tool", tool},
             {"args", args}};
    if (i % 6 == 0) req["estimated_cost_usd"] = 0.125 * (i % 5);
    const int64_t t = kT0 + i * 1000;
    DecideInput in{&req, t};
    DecideInto(i % 50 == 49 ? PolicyInForce() : pif, ledger, in, &d);
    d.checks.clear();
    Json j = d.ToJson();
    Json compared = Json::object();
    for (const char* const* f = kComparedFields; *f != nullptr; ++f) {
      if (j.contains(*f)) compared[*f] = j[*f];
    }
    std::string want, got;
    ASSERT_TRUE(CanonicalBytes(compared, &want).ok());
    ASSERT_TRUE(ComparedDecisionBytes(d, &got)) << want;
    EXPECT_EQ(got, want);
    seen.insert(d.verdict + (d.has_reservation ? "+res" : "") + (d.notify.empty() ? "" : "+notify") +
                (d.error_code.empty() ? "" : "+" + d.error_code));
    ledger.ApplyDecision(rid, req, j);
    by_json.ApplyDecision(rid, req, compared);
    by_struct.ApplyDecision(rid, req["org_id"].get<std::string>(), req["agent_id"].get<std::string>(),
                            req["session_id"].get<std::string>(), tool, d);
    EXPECT_TRUE(by_struct == by_json) << i;
  }
  // Every kind of decision was met.
  for (const char* kind :
       {"allow+res", "allow+res+notify", "ask+res", "ask+res+notify", "deny+E_POLICY_DENIED",
        "deny+E_BUDGET_EXCEEDED", "deny+E_UNKNOWN_TOOL", "deny+E_NO_POLICY"}) {
    bool any = false;
    for (const auto& k : seen) any = any || k.rfind(kind, 0) == 0;
    EXPECT_TRUE(any) << kind << " not met; met: " << ::testing::PrintToString(seen);
  }
  // A string that is not UTF-8: no bytes, as CanonicalBytes gives none.
  d.reason = "bad \xc3";
  std::string out;
  EXPECT_FALSE(ComparedDecisionBytes(d, &out));
}

TEST(FormatDurationTest, PicksAReadableUnit) {
  EXPECT_EQ(FormatDuration(820), "820 µs");
  EXPECT_EQ(FormatDuration(35'000), "35.0 ms");
  EXPECT_EQ(FormatDuration(3'000'000), "3.00 s");
  EXPECT_EQ(FormatDuration(600'000'000), "10.0 min");
}

}  // namespace
}  // namespace tollgate::replay
