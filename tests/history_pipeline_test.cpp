// Policy over a session's history (issue 33; docs/policy.md, "History")
// through the real pipeline: signed calls on the embedded Kafka broker, the
// real decide, approve and execute stages, a RocksDB log, a loopback server.
// The three worked examples (exfiltration after untrusted content, a secret
// read then the network, many deletes in a few minutes) ask or deny, and
// the same calls in another order or another session do not; an approver
// declassifies a session; replay --verify re-makes history decisions across
// a restart; what-if applies a new history rule to old sessions.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "audit/log_sink.h"
#include "replay/log_source.h"
#include "replay/redecide.h"
#include "tests/approve_util.h"
#include "tests/child_process.h"
#include "tests/http_pipeline_fixture.h"
#include "tests/pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::RecordingServer;

// What every policy here has: calls decided by the allow list (not by mode
// dangerous, which would allow before any ask rule is read), POST allowed
// to reach the allow list, loopback reachable, writes on.
constexpr char kBase[] = R"(version: 1
mode: ask
allow: ["http_request:*", "read_file:*", "write_file:*", "delete_file:*"]
http_request:
  allowed_methods: [GET, POST]
execute:
  writes_enabled: true
  network: {allow_cidrs: ["127.0.0.0/8"], max_redirects: 0}
)";

// Example 1: no POST once the session has read content from a host outside
// the trusted list (127.0.0.1 is not localhost, as far as labels go).
const std::string kExfiltration = std::string(kBase) + R"(labels:
  trusted_hosts: [localhost]
rules:
  - name: no-post-after-untrusted
    tool: [http_request]
    when: {method: POST, session: {integrity: untrusted}}
    verdict: deny
)";

class HistoryPipelineTest : public testing::PolicyPipelineTest {
 protected:
  // Whether the agent got a pending result for `rid` (an asked call) within 30 s.
  bool AwaitPending(const std::string& rid) {
    return testing::WaitUntil(
        [&] {
          std::vector<Message> batch;
          results_->Poll(100, std::chrono::milliseconds(50), &batch);
          for (const Json& p : results_->pending()) {
            if (p.value("request_id", "") == rid) return true;
          }
          return false;
        },
        std::chrono::seconds(30));
  }
  std::vector<Event> EventsOf(const std::string& rid) {
    std::vector<Event> out;
    StoreLogView view(p_->log().store());
    EXPECT_TRUE(view.EventsOfRequest("org-1", rid, &out).ok());
    return out;
  }
  // The event of `type` of `rid`, waited for (30 s).
  std::optional<Event> EventOf(const std::string& rid, const std::string& type) {
    std::optional<Event> found;
    testing::WaitUntil(
        [&] {
          for (Event& e : EventsOf(rid)) {
            if (e.type == type) found = std::move(e);
          }
          return found.has_value();
        },
        std::chrono::seconds(30));
    if (!found) ADD_FAILURE() << "no " << type << " for " << rid;
    return found;
  }
  // decision.made's data for `rid`.
  Json DecisionOf(const std::string& rid) {
    auto e = EventOf(rid, "decision.made");
    return e ? e->data : Json();
  }
  // The seq of the execution.completed of `rid`: what history rules cite.
  uint64_t CompletedSeq(const std::string& rid) {
    auto e = EventOf(rid, "execution.completed");
    return e ? e->seq : 0;
  }
  // An approver's signed answer to the asked call `rid`, with `extra`
  // fields (declassify, comment) beside the usual ones.
  void Approve(const std::string& rid, const Json& extra = Json::object()) {
    auto asked = EventOf(rid, "approval.requested");
    ASSERT_TRUE(asked.has_value()) << rid << " was never held for an approver";
    Json response = testing::Response(rid, "approve", "alice", asked->data.value("args_hash", ""));
    response.update(extra);
    Message m = MessageFor(bus_.topics.approval_responses(), {{"request_id", rid}, {"agent_id", "agent-1"}},
                           response);
    signers_->SignResponse(&m, "org-1", "alice");
    ASSERT_TRUE(producer_->Send(m).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  // agent-1's workspace, where its file tools read and write.
  std::string Workspace() const { return dir_.sub("data") + "/workspaces/org-1/agent-1"; }
  void WriteInWorkspace(const std::string& rel, const std::string& content) {
    const std::filesystem::path p = Workspace() + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  // Stops the pipeline and starts it again on the same data dir.
  void Restart(const std::string& policy) {
    results_.reset();
    producer_.reset();
    signers_.reset();
    p_.reset();
    StartWith(policy);
  }
  static Json Get(const RecordingServer& s) { return {{"method", "GET"}, {"url", s.origin() + "/page"}}; }
  static Json Post(const RecordingServer& s) {
    return {{"method", "POST"}, {"url", s.origin() + "/upload"}, {"body", "the session's data"}};
  }
};

std::vector<uint64_t> Seqs(const Json& matched) {
  return matched.is_array() ? matched.get<std::vector<uint64_t>>() : std::vector<uint64_t>{};
}

// ---------------------------------------------------------------------------
// The three worked examples.

TEST_F(HistoryPipelineTest, ExfiltrationAfterUntrustedContentIsDenied) {
  StartWith(kExfiltration);
  RecordingServer s;
  Json got = Call("get-1", "http_request", Get(s));
  ASSERT_EQ(got["status"], "completed") << got.dump();
  const uint64_t get_seq = CompletedSeq("get-1");

  Json post = Call("post-1", "http_request", Post(s));
  EXPECT_EQ(post["status"], "denied") << post.dump();
  EXPECT_EQ(post["result"]["error"]["code"], "E_POLICY_DENIED") << post.dump();
  EXPECT_EQ(post["decision"]["rule"], "org.rule:no-post-after-untrusted") << post.dump();
  Json d = DecisionOf("post-1");
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["history"]["integrity"], "untrusted") << d.dump();
  EXPECT_EQ(d["history"]["rule"], "no-post-after-untrusted") << d.dump();
  EXPECT_EQ(Seqs(d["history"]["matched"]), std::vector<uint64_t>{get_seq}) << d.dump();
  EXPECT_NE(
      d.value("reason", "").find("(history: seq " + std::to_string(get_seq) + " brought untrusted content"),
      std::string::npos)
      << d.dump();

  // The other order: the POST comes before anything untrusted.
  Json first = Call("post-2", "http_request", Post(s), "sess-2");
  EXPECT_EQ(first["status"], "completed") << first.dump();
  EXPECT_EQ(Call("get-2", "http_request", Get(s), "sess-2")["status"], "completed");
  // Another session: sess-1's GET says nothing about it.
  Json other = Call("post-3", "http_request", Post(s), "sess-3");
  EXPECT_EQ(other["status"], "completed") << other.dump();
  Json od = DecisionOf("post-3");
  EXPECT_EQ(od["verdict"], "allow");
  ASSERT_TRUE(od.contains("history")) << "a policy with labels records the history: " << od.dump();
  EXPECT_FALSE(od["history"].contains("rule")) << od.dump();

  // The denied POST never reached the server; the others did, in order.
  EXPECT_EQ(s.methods(), (std::vector<std::string>{"GET", "POST", "GET", "POST"}));
}

TEST_F(HistoryPipelineTest, SecretReadThenNetworkIsDenied) {
  StartWith(std::string(kBase) + R"(labels:
  secret: ["read_file:*/secrets/*"]
rules:
  - name: no-network-after-secret
    tool: [http_request]
    when: {session: {confidentiality: secret}}
    verdict: deny
)");
  RecordingServer s;
  WriteInWorkspace("project/secrets/key.txt", "the launch date is in march\n");
  WriteInWorkspace("project/notes.txt", "nothing much\n");

  Json read = Call("read-secret", "read_file", {{"path", "project/secrets/key.txt"}});
  ASSERT_EQ(read["status"], "completed") << read.dump();
  const uint64_t read_seq = CompletedSeq("read-secret");
  Json get = Call("get-1", "http_request", Get(s));
  EXPECT_EQ(get["status"], "denied") << get.dump();
  EXPECT_EQ(get["decision"]["rule"], "org.rule:no-network-after-secret") << get.dump();
  Json d = DecisionOf("get-1");
  EXPECT_EQ(d["history"]["confidentiality"], "secret") << d.dump();
  EXPECT_EQ(d["history"]["rule"], "no-network-after-secret") << d.dump();
  EXPECT_EQ(Seqs(d["history"]["matched"]), std::vector<uint64_t>{read_seq}) << d.dump();

  // A read of a file no secret glob names, then the same GET: allowed.
  ASSERT_EQ(Call("read-notes", "read_file", {{"path", "project/notes.txt"}}, "sess-2")["status"],
            "completed");
  Json ok = Call("get-2", "http_request", Get(s), "sess-2");
  EXPECT_EQ(ok["status"], "completed") << ok.dump();
  EXPECT_EQ(DecisionOf("get-2")["history"]["confidentiality"], "public");
  EXPECT_EQ(s.methods(), std::vector<std::string>{"GET"}) << "only sess-2's GET reached the server";
}

TEST_F(HistoryPipelineTest, ManyDeletesInMinutesAsk) {
  StartWith(std::string(kBase) + R"(rules:
  - name: many-deletes
    after: {tool: delete_file, count: 3}
    within: {minutes: 10}
    then: {tool: delete_file}
    verdict: ask
)");
  for (const char* f : {"d1", "d2", "d3", "d4", "d5"}) WriteInWorkspace(f, "x\n");
  std::vector<uint64_t> seqs;
  for (const std::string f : {"d1", "d2", "d3"}) {
    Json r = Call("del-" + f, "delete_file", {{"path", f}});
    ASSERT_EQ(r["status"], "completed") << r.dump();
    EXPECT_FALSE(std::filesystem::exists(Workspace() + "/" + f));
    seqs.push_back(CompletedSeq("del-" + f));
  }
  // The fourth asks: held for an approver, not run.
  Send(Request("del-d4", "delete_file", {{"path", "d4"}}));
  EXPECT_TRUE(AwaitPending("del-d4")) << "the agent was not told its call waits for an approver";
  ASSERT_TRUE(EventOf("del-d4", "approval.requested").has_value());
  Json d = DecisionOf("del-d4");
  EXPECT_EQ(d["verdict"], "ask") << d.dump();
  EXPECT_EQ(d["rule"], "org.rule:many-deletes") << d.dump();
  EXPECT_EQ(d["history"]["rule"], "many-deletes") << d.dump();
  EXPECT_EQ(Seqs(d["history"]["matched"]), seqs) << d.dump();
  EXPECT_NE(d.value("reason", "").find("matched its after: within the last 10 minutes"), std::string::npos)
      << d.dump();
  EXPECT_TRUE(std::filesystem::exists(Workspace() + "/d4")) << "an asked delete ran";

  // Another session has deleted nothing yet: its delete runs.
  Json other = Call("del-d5", "delete_file", {{"path", "d5"}}, "sess-2");
  EXPECT_EQ(other["status"], "completed") << other.dump();
  EXPECT_EQ(DecisionOf("del-d5")["verdict"], "allow");
}

// ---------------------------------------------------------------------------
// Declassification.

TEST_F(HistoryPipelineTest, ADeclassifiedSessionIsCleanAgain) {
  StartWith(std::string(kBase) + R"(labels:
  trusted_hosts: [localhost]
rules:
  - name: ask-writes-after-untrusted
    tool: [write_file]
    when: {session: {integrity: untrusted}}
    verdict: ask
)");
  RecordingServer s;
  ASSERT_EQ(Call("get-1", "http_request", Get(s))["status"], "completed");
  const uint64_t get_seq = CompletedSeq("get-1");

  Send(Request("write-1", "write_file", {{"path", "a.txt"}, {"content", "one"}}));
  ASSERT_TRUE(EventOf("write-1", "approval.requested").has_value());
  Json asked = DecisionOf("write-1");
  EXPECT_EQ(asked["verdict"], "ask") << asked.dump();
  EXPECT_EQ(Seqs(asked["history"]["matched"]), std::vector<uint64_t>{get_seq}) << asked.dump();

  const std::string why = "the page was our own status page";
  Approve("write-1", {{"declassify", true}, {"comment", why}});
  Json written = Await("write-1");
  EXPECT_EQ(written["status"], "completed") << written.dump();
  auto granted = EventOf("write-1", "approval.granted");
  ASSERT_TRUE(granted.has_value());
  EXPECT_EQ(granted->data["declassify"], true) << granted->data.dump();
  EXPECT_EQ(granted->data["comment"], why);
  EXPECT_EQ(granted->data["approver"], "alice");

  // The next write would have asked; the session is clean again.
  Json next = Call("write-2", "write_file", {{"path", "b.txt"}, {"content", "two"}});
  EXPECT_EQ(next["status"], "completed") << next.dump();
  Json d = DecisionOf("write-2");
  EXPECT_EQ(d["verdict"], "allow") << d.dump();
  ASSERT_TRUE(d.contains("history")) << d.dump();
  EXPECT_EQ(d["history"]["integrity"], "trusted") << d.dump();
  EXPECT_FALSE(d["history"].contains("rule")) << d.dump();
}

// ---------------------------------------------------------------------------
// Replay.

TEST_F(HistoryPipelineTest, ReplayVerifyIsCleanForHistoryDecisionsAcrossARestartFromASnapshot) {
  StartWith(kExfiltration);
  RecordingServer s;
  ASSERT_EQ(Call("get-1", "http_request", Get(s))["status"], "completed");
  const uint64_t get_seq = CompletedSeq("get-1");
  ASSERT_EQ(Call("post-1", "http_request", Post(s))["status"], "denied");
  const std::string snapshot = dir_.sub("data") + "/decide-ledger.snapshot";
  ASSERT_TRUE(std::filesystem::exists(snapshot)) << "decide wrote no snapshot to restart from";

  Restart(kExfiltration);
  // The restarted decide holds the session's facts, in its snapshot too.
  auto snapshot_has_session = [&] {
    std::ifstream in(snapshot);
    Json j;
    if (!in || !ParseJson(std::string(std::istreambuf_iterator<char>(in), {}), &j).ok()) return false;
    for (const Json& f : j["body"]["session_facts"].value("sessions", Json::array())) {
      if (f.value("session", "") == "sess-1" && f.value("integrity", "") == "untrusted" &&
          f.value("integrity_seq", uint64_t{0}) == get_seq)
        return true;
    }
    return false;
  };
  EXPECT_TRUE(testing::WaitUntil(snapshot_has_session, std::chrono::seconds(10)))
      << "the snapshot written at the restart lacks sess-1's facts";
  // A history rule fires on a completion from before the restart.
  Json post = Call("post-2", "http_request", Post(s));
  EXPECT_EQ(post["status"], "denied") << post.dump();
  EXPECT_EQ(Seqs(DecisionOf("post-2")["history"]["matched"]), std::vector<uint64_t>{get_seq});
  ASSERT_EQ(Call("get-2", "http_request", Get(s))["status"], "completed");
  ASSERT_EQ(Call("post-3", "http_request", Post(s))["status"], "denied");
  EXPECT_EQ(s.methods(), (std::vector<std::string>{"GET", "GET"}));

  std::vector<Event> inputs;
  ASSERT_TRUE(replay::ReadDecisionInputs(p_->log().store(), replay::Target::Session("sess-1"), &inputs).ok());
  replay::RedecideReport r = replay::Redecide(inputs, replay::Target::Session("sess-1"), {});
  EXPECT_EQ(r.decisions, 5u) << replay::FormatReport(r);
  EXPECT_TRUE(r.clean()) << replay::FormatReport(r);
  for (const std::string rid : {"get-1", "get-2"}) {
    Json d = DecisionOf(rid);
    EXPECT_TRUE(d.contains("history")) << rid << ": " << d.dump();
    EXPECT_FALSE(d["history"].contains("rule")) << rid << ": " << d.dump();
  }
  for (const std::string rid : {"post-1", "post-2", "post-3"}) {
    Json d = DecisionOf(rid);
    EXPECT_EQ(d["history"]["rule"], "no-post-after-untrusted") << rid << ": " << d.dump();
    EXPECT_EQ(Seqs(d["history"]["matched"]), std::vector<uint64_t>{get_seq}) << rid << ": " << d.dump();
  }
}

TEST_F(HistoryPipelineTest, WhatIfWithANewHistoryRuleFlipsExactlyTheCallsItShould) {
  // Recorded under a policy without history rules: every call ran.
  StartWith(kBase);
  RecordingServer s;
  ASSERT_EQ(Call("get-1", "http_request", Get(s))["status"], "completed");
  const uint64_t get_seq = CompletedSeq("get-1");
  for (const std::string rid : {"post-1", "post-2"})
    ASSERT_EQ(Call(rid, "http_request", Post(s))["status"], "completed") << rid;
  for (const std::string rid : {"post-3", "post-4"})
    ASSERT_EQ(Call(rid, "http_request", Post(s), "sess-2")["status"], "completed") << rid;

  PolicyPtr candidate;
  Status st = LoadPolicyYaml(std::string(kBase) + R"(rules:
  - name: no-post-after-get
    after: {invocation: "http_request:GET *"}
    within: {calls: 10}
    then: {tool: http_request, when: {method: POST}}
    verdict: deny
)",
                             "candidate.yaml", &candidate);
  ASSERT_TRUE(st.ok()) << st.ToString();
  replay::Target target;
  target.org_id = "org-1";
  target.agent_id = "agent-1";  // both sessions
  std::vector<Event> inputs;
  Status read = replay::ReadDecisionInputs(p_->log().store(), target, &inputs);
  ASSERT_TRUE(read.ok()) << read.ToString();
  replay::RedecideOptions o;
  o.candidate = candidate;
  replay::RedecideReport r = replay::Redecide(inputs, target, o);
  EXPECT_EQ(r.decisions, 5u) << replay::FormatReport(r);

  std::vector<std::string> flipped;
  for (const replay::DecisionChange& c : r.changes) {
    flipped.push_back(c.request_id);
    EXPECT_EQ(c.session_id, "sess-1") << c.request_id << ": sess-2 did no GET";
    EXPECT_EQ(c.transition(), "allow→deny") << c.request_id;
    Json redecided = c.redecided;  // non-const: a missing key reads as null
    EXPECT_EQ(redecided["history"]["rule"], "no-post-after-get") << redecided.dump();
    EXPECT_EQ(Seqs(redecided["history"]["matched"]), std::vector<uint64_t>{get_seq})
        << c.request_id << " flipped because of the GET: " << redecided.dump();
  }
  std::sort(flipped.begin(), flipped.end());
  EXPECT_EQ(flipped, (std::vector<std::string>{"post-1", "post-2"})) << replay::FormatReport(r);
  EXPECT_EQ(r.sessions["sess-2"].changes, 0u);
}

}  // namespace
}  // namespace tollgate
