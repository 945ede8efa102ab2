// The approve stage as a pure function (no Kafka, no RocksDB): asks,
// responses, quorum, refusals, expiry on time alone, allow-always, replay
// after a crash; and what RequestState and the reconciler make of approvals.
#include <gtest/gtest.h>

#include <map>

#include "approve/approve_stage.h"
#include "approve_util.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "core/request_state.h"
#include "core/schema.h"
#include "core/sha256.h"
#include "core/withdraw.h"
#include "decide/policy_engine.h"
#include "deploy/reconciler.h"

namespace tollgate {
namespace {

using testing::AskSpec;
using testing::MakeAsk;
using testing::Response;

constexpr int64_t kT0 = 1'790'000'000'000'000;

// The log as a vector: a request is (org, request_id), as in the real log.
class VectorLog : public LogView {
 public:
  Status EventsOfRequest(const std::string& org, const std::string& rid,
                         std::vector<Event>* out) const override {
    out->clear();
    for (const auto& e : events_) {
      if (e.org_id == org && e.request_id == rid) out->push_back(e);
    }
    return Status::Ok();
  }
  // Appends like the log (dedupe by id) and tells the stage, like the sink.
  void Append(const std::vector<Event>& events, ApproveStage* listener = nullptr) {
    std::vector<Event> appended;
    for (Event e : events) {
      bool dup = false;
      for (auto& have : events_) dup |= have.id == e.id;
      if (!dup) {
        e.seq = events_.size() + 1;
        events_.push_back(e);
      }
      appended.push_back(e);
    }
    if (listener) listener->OnAppended(appended);
  }
  std::vector<Event> Of(const std::string& type) const {
    std::vector<Event> out;
    for (const auto& e : events_) {
      if (e.type == type) out.push_back(e);
    }
    return out;
  }
  std::vector<Event> events_;
};

Message Msg(const std::string& topic, const Json& value, const std::string& key = "agent-1") {
  Message m;
  m.topic = topic;
  m.key = key;
  m.value = value.dump();
  return m;
}

// Approvers sign their responses (docs/trust.md): each identity has an
// approver_key in a CredentialRegistry, and the stage checks responses with
// the deployment's RegistryAuthenticator, as deploy/pipeline.cpp wires it.
class ApproveTest : public ::testing::Test {
 protected:
  ApproveConfig Config() {
    ApproveConfig ac;
    ac.topics = topics_;
    ac.authenticate = RegistryAuthenticator(&registry_, kDefaultMaxSkewUs);
    return ac;
  }
  StageContext Ctx(int n, int64_t at = kT0 + 1'000'000) { return {at, "inc/topic/0/" + std::to_string(n)}; }
  // The key of approver `identity` of `org`, registered on first use.
  const JwtSigner& Approver(const std::string& identity, const std::string& org = "org-1") {
    auto it = signers_.find(identity);
    if (it != signers_.end()) return it->second;
    Credential c;
    JwtSigner s;
    EXPECT_TRUE(NewSigningKey("approver_key", org, identity, {"approver"}, "test", &c, &s).ok());
    registry_.Apply(CredentialAddedEvent(c, kT0));
    return signers_.emplace(identity, std::move(s)).first->second;
  }
  // A response message signed at `at` by `as` (default: the approver it
  // names, else alice), an approver of `org`.
  Message Signed(const Json& response, int64_t at = kT0 + 2'000'000, std::string as = "",
                 const std::string& org = "org-1") {
    if (as.empty()) as = response.is_object() ? response.value("approver", "alice") : "alice";
    Message m = Msg(topics_.approval_responses(), response);
    const std::string rid = response.is_object() ? response.value("request_id", "") : "";
    m.headers[kHeaderAuth] = SignResponse(Approver(as, org), as, org, rid, m.value, at / 1'000'000);
    return m;
  }
  // decide's events in the log, the Flow processed by the stage, its events appended.
  std::string Hold(const AskSpec& spec) {
    auto ask = MakeAsk(spec, kT0);
    log_.Append(ask.events);
    StageResult r = stage_.Process(Msg(topics_.approve(), ask.flow.ToJson()), Ctx(next_++), log_);
    // Held, not answered: the agent is only told that its call waits.
    EXPECT_EQ(r.outputs.size(), 1u) << "held, not answered";
    if (r.outputs.size() == 1) {
      EXPECT_EQ(r.outputs[0].message.topic, topics_.results());
      EXPECT_EQ(r.outputs[0].value_json.value("status", ""), "pending");
      EXPECT_TRUE(r.outputs[0].value_json["result"].is_null());
    }
    log_.Append(r.events, &stage_);
    return ask.flow.args_hash;
  }
  // Processes `m` as a response read at `at`; its events appended.
  StageResult Deliver(const Message& m, int64_t at = kT0 + 2'000'000) {
    StageResult r = stage_.Process(m, Ctx(next_++, at), log_);
    log_.Append(r.events, &stage_);
    return r;
  }
  // A response signed by the approver it names.
  StageResult Respond(const Json& response, int64_t at = kT0 + 2'000'000) {
    return Deliver(Signed(response, at), at);
  }
  RequestState State(const std::string& rid, const std::string& org = "org-1") {
    history_.clear();
    log_.EventsOfRequest(org, rid, &history_);
    return Summarize(history_);
  }

  Topics topics_;
  CredentialRegistry registry_;
  std::map<std::string, JwtSigner> signers_;
  ApproveStage stage_{Config()};
  VectorLog log_;
  std::vector<Event> history_;
  int next_ = 1;
};

TEST_F(ApproveTest, AnAskIsHeldWithItsQuorumDeadlineAndArgsHash) {
  AskSpec spec;
  spec.quorum = 2;
  spec.approvers = {"alice", "bob", "carol"};
  spec.timeout_s = 60;
  const std::string hash = Hold(spec);
  auto req = log_.Of("approval.requested");
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0].data["approvers_needed"], 2);
  EXPECT_EQ(req[0].data["args_hash"], hash);
  EXPECT_EQ(req[0].data["approvers"], Json::array({"alice", "bob", "carol"}));
  EXPECT_EQ(req[0].data["deadline"], FormatTime(kT0 + 60'000'000)) << "decision.made time + timeout_s";
  EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(req[0].BodyJson()).ok());
  EXPECT_EQ(stage_.pending(), 1u);
  EXPECT_EQ(stage_.next_deadline_us(), kT0 + 60'000'000);
  EXPECT_TRUE(State("r1").approval_pending());
  // A re-sent copy (another source) asks nothing new.
  auto ask = MakeAsk(spec, kT0);
  StageResult again = stage_.Process(Msg(topics_.approve(), ask.flow.ToJson()), Ctx(99), log_);
  EXPECT_TRUE(again.events.empty());
  EXPECT_TRUE(again.outputs.empty());
}

TEST_F(ApproveTest, AFlowWithoutAnAskInTheLogIsNotHeld) {
  auto ask = MakeAsk(AskSpec{}, kT0);
  log_.Append({ask.events[0]});  // received, never decided
  StageResult r = stage_.Process(Msg(topics_.approve(), ask.flow.ToJson()), Ctx(1), log_);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.rejected");
  EXPECT_EQ(r.events[0].data["error"]["code"], "E_NOT_IN_LOG") << "the flow's decision is not in the log";
  EXPECT_EQ(r.events[0].org_id, "unknown");
  EXPECT_TRUE(log_.Of("approval.requested").empty());
}

TEST_F(ApproveTest, QuorumOfTwoCountsDistinctApproversAndForwardsOnce) {
  AskSpec spec;
  spec.quorum = 2;
  const std::string hash = Hold(spec);
  StageResult a1 = Respond(Response("r1", "approve", "alice", hash));
  ASSERT_EQ(a1.events.size(), 1u);
  EXPECT_EQ(a1.events[0].type, "approval.granted");
  EXPECT_TRUE(a1.outputs.empty()) << "one of two";
  StageResult a2 = Respond(Response("r1", "approve", "alice", hash));
  ASSERT_EQ(a2.events.size(), 1u);
  EXPECT_EQ(a2.events[0].type, "approval.refused");
  EXPECT_EQ(a2.events[0].data["code"], "E_APPROVAL_DUPLICATE");
  EXPECT_TRUE(a2.outputs.empty());
  EXPECT_TRUE(State("r1").approval_pending()) << "the same approver twice counts once";
  EXPECT_EQ(stage_.pending(), 1u);
  StageResult b = Respond(Response("r1", "approve", "bob", hash));
  ASSERT_EQ(b.outputs.size(), 1u);
  EXPECT_EQ(b.outputs[0].message.topic, topics_.execute());
  Json flow = Json::parse(b.outputs[0].message.value);
  EXPECT_EQ(flow["request"]["args"]["text"], "hi");
  EXPECT_EQ(flow["approval"]["approvers"], Json::array({"alice", "bob"}));
  EXPECT_EQ(flow["decision"]["verdict"], "ask");
  RequestState st = State("r1");
  EXPECT_TRUE(st.cleared());
  EXPECT_EQ(st.grants.size(), 2u);
  EXPECT_EQ(stage_.pending(), 0u);
  // A late answer is refused as settled.
  StageResult late = Respond(Response("r1", "deny", "carol", hash));
  ASSERT_EQ(late.events.size(), 1u);
  EXPECT_EQ(late.events[0].data["code"], "E_APPROVAL_SETTLED");
  EXPECT_TRUE(late.outputs.empty());
}

TEST_F(ApproveTest, OneDenyEndsItWithADeniedResult) {
  AskSpec spec;
  spec.quorum = 2;
  const std::string hash = Hold(spec);
  Respond(Response("r1", "approve", "alice", hash));
  Json deny = Response("r1", "deny", "bob", hash);
  deny["comment"] = "not on a Friday";
  StageResult d = Respond(deny);
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "approval.denied");
  ASSERT_EQ(d.outputs.size(), 1u);
  EXPECT_EQ(d.outputs[0].message.topic, topics_.results());
  EXPECT_EQ(d.outputs[0].log_seq_of_event, 0);
  Json result = Json::parse(d.outputs[0].message.value);
  EXPECT_EQ(result["status"], "denied");
  EXPECT_EQ(result["result"]["error"]["code"], "E_APPROVAL_DENIED");
  EXPECT_EQ(result["approval"]["approver"], "bob");
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("result", result).ok());
  RequestState st = State("r1");
  EXPECT_TRUE(st.terminal());
  EXPECT_FALSE(st.cleared());
  EXPECT_EQ(stage_.pending(), 0u);
}

TEST_F(ApproveTest, AGrantWithDeclassifyRecordsItInApprovalGranted) {
  const std::string hash = Hold(AskSpec{});
  Json grant = Response("r1", "approve", "alice", hash);
  grant["declassify"] = true;
  grant["comment"] = "the fetched page was our own docs site";
  StageResult r = Respond(grant);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.granted");
  EXPECT_EQ(r.events[0].data["declassify"], true);
  EXPECT_EQ(r.events[0].data["approver"], "alice") << "who declassified";
  EXPECT_EQ(r.events[0].data["comment"], "the fetched page was our own docs site") << "why";
  EXPECT_EQ(r.events[0].session_id, "sess-1") << "the session it declassifies";
  EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(r.events[0].BodyJson()).ok());
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, topics_.execute());
  EXPECT_TRUE(State("r1").cleared());

  // A plain grant records no declassify; on a deny it means nothing and
  // is left out, not refused.
  AskSpec plain;
  plain.request_id = "r2";
  const std::string hash2 = Hold(plain);
  StageResult p = Respond(Response("r2", "approve", "alice", hash2));
  ASSERT_EQ(p.events.size(), 1u);
  EXPECT_EQ(p.events[0].type, "approval.granted");
  EXPECT_FALSE(p.events[0].data.contains("declassify"));
  AskSpec denied;
  denied.request_id = "r3";
  const std::string hash3 = Hold(denied);
  Json deny = Response("r3", "deny", "bob", hash3);
  deny["declassify"] = true;
  StageResult d = Respond(deny);
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "approval.denied");
  EXPECT_FALSE(d.events[0].data.contains("declassify"));
}

TEST_F(ApproveTest, ADeclassifyWithoutAReasonIsRefused) {
  const std::string hash = Hold(AskSpec{});
  Json grant = Response("r1", "approve", "alice", hash);
  grant["declassify"] = true;
  for (const Json& comment : {Json(), Json(""), Json(" \n ")}) {
    Json without = grant;
    if (!comment.is_null()) without["comment"] = comment;
    StageResult r = Respond(without);
    ASSERT_EQ(r.events.size(), 1u) << comment;
    EXPECT_EQ(r.events[0].type, "approval.refused");
    EXPECT_EQ(r.events[0].data["code"], "E_INVALID_RESPONSE");
    EXPECT_NE(r.events[0].data.value("message", "").find("comment"), std::string::npos);
    EXPECT_TRUE(r.outputs.empty());
    EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(r.events[0].BodyJson()).ok());
  }
  EXPECT_TRUE(State("r1").approval_pending()) << "a refused declassify grants nothing";
  EXPECT_TRUE(log_.Of("approval.granted").empty());
  // With its reason, the same approver's grant counts.
  grant["comment"] = "reviewed the session: nothing untrusted reached this call";
  StageResult ok = Respond(grant);
  ASSERT_EQ(ok.events.size(), 1u);
  EXPECT_EQ(ok.events[0].type, "approval.granted");
  EXPECT_EQ(ok.events[0].data["declassify"], true);
}

TEST_F(ApproveTest, RefusalsAreLoggedWithTheirReason) {
  AskSpec spec;
  spec.approvers = {"alice"};
  const std::string hash = Hold(spec);
  struct Case {
    Json response;
    const char* code;
  };
  const std::string other(64, 'a');
  const Case cases[] = {
      {Response("r1", "approve", "alice", other), "E_ARGS_HASH_MISMATCH"},
      {Response("r1", "approve", "mallory", hash), "E_APPROVER_NOT_ENTITLED"},
      {Response("nope", "approve", "alice", hash), "E_APPROVAL_UNKNOWN"},
      {Json{{"request_id", "r1"}, {"decision", "maybe"}}, "E_INVALID_RESPONSE"},
  };
  for (const Case& c : cases) {
    StageResult r = Respond(c.response);
    ASSERT_EQ(r.events.size(), 1u) << c.code;
    EXPECT_EQ(r.events[0].type, "approval.refused");
    EXPECT_EQ(r.events[0].data["code"], c.code);
    EXPECT_FALSE(r.events[0].data.value("message", "").empty());
    EXPECT_TRUE(r.outputs.empty());
    EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(r.events[0].BodyJson()).ok()) << c.code;
  }
  StageResult bad_json = stage_.Process(Signed(Json("x")), Ctx(50, kT0 + 2'000'000), log_);
  ASSERT_EQ(bad_json.events.size(), 1u);
  EXPECT_EQ(bad_json.events[0].data["code"], "E_INVALID_RESPONSE");
  EXPECT_TRUE(State("r1").approval_pending()) << "refusals change nothing";
  EXPECT_EQ(log_.Of("approval.refused").size(), 4u);
}

TEST_F(ApproveTest, TickExpiresOnTimeWithoutAnyMessage) {
  AskSpec spec;
  spec.timeout_s = 30;
  Hold(spec);
  StageResult early = stage_.Tick({kT0 + 29'000'000, "tick"}, log_);
  EXPECT_TRUE(early.events.empty());
  StageResult due = stage_.Tick({kT0 + 30'000'000, "tick"}, log_);
  ASSERT_EQ(due.events.size(), 1u);
  EXPECT_EQ(due.events[0].type, "approval.expired");
  EXPECT_EQ(due.events[0].data["deadline"], FormatTime(kT0 + 30'000'000));
  ASSERT_EQ(due.outputs.size(), 1u);
  Json result = Json::parse(due.outputs[0].message.value);
  EXPECT_EQ(result["status"], "expired");
  EXPECT_EQ(result["result"]["error"]["code"], "E_APPROVAL_EXPIRED");
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("result", result).ok());
  log_.Append(due.events, &stage_);
  EXPECT_EQ(stage_.pending(), 0u);
  EXPECT_TRUE(stage_.Tick({kT0 + 31'000'000, "tick"}, log_).events.empty());
}

TEST_F(ApproveTest, AGrantAfterTheDeadlineNeverRuns) {
  AskSpec spec;
  spec.timeout_s = 30;
  const std::string hash = Hold(spec);
  StageResult r = Respond(Response("r1", "approve", "alice", hash), kT0 + 31'000'000);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].type, "approval.expired");
  EXPECT_EQ(r.events[1].data["code"], "E_APPROVAL_EXPIRED");
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, topics_.results());
  EXPECT_FALSE(State("r1").cleared());
}

TEST_F(ApproveTest, AllowAlwaysWritesTheContractsPolicyUpdated) {
  AskSpec spec;
  spec.tool = "http_request";
  spec.args = {{"method", "POST"}, {"url", "https://api.example.com/x?a=*"}};
  spec.invocation = "http_request:POST https://api.example.com/x?a=*";
  const std::string hash = Hold(spec);
  StageResult r = Respond(Response("r1", "approve", "alice", hash, "always"));
  ASSERT_EQ(r.events.size(), 2u);
  const Event& p = r.events[1];
  EXPECT_EQ(p.type, "policy.updated");
  EXPECT_EQ(p.request_id, "r1");
  EXPECT_EQ(p.org_id, "org-1");
  EXPECT_EQ(p.agent_id, "agent-1");
  EXPECT_EQ(p.session_id, "sess-1");
  const std::string pattern = "http_request:POST https://api.example.com/x\\?a=\\*";
  EXPECT_EQ(p.data["allow"], Json::array({pattern}));
  std::string canon;
  ASSERT_TRUE(
      CanonicalBytes(Json{{"agent_id", "agent-1"}, {"org_id", "org-1"}, {"allow", {pattern}}}, &canon).ok());
  const std::string h = Sha256Hex(canon);
  EXPECT_EQ(p.data["content_hash"], h);
  EXPECT_EQ(p.data["policy_version"], "agent-rule:" + h.substr(0, 16));
  EXPECT_EQ(p.data["source"], "approval:r1");
  EXPECT_EQ(p.data["tier"], "agent_local");
  EXPECT_EQ(p.data["approver"], "alice");
  EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(p.BodyJson()).ok());
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, topics_.execute());
  EXPECT_EQ(EscapeGlob(std::string("a*b?c[d]e\\f")), "a\\*b\\?c\\[d\\]e\\\\f");
}

// A file tool's invocation names the tool alone: the rule pins the
// decision's subject (the tool and its normalised path) instead.
TEST_F(ApproveTest, AllowAlwaysForAFileToolPinsItsPath) {
  AskSpec spec;
  spec.tool = "write_file";
  spec.args = {{"path", "notes/[draft]*.txt"}, {"content", "x"}};
  spec.subject = "write_file:notes/[draft]*.txt";
  const std::string hash = Hold(spec);
  StageResult r = Respond(Response("r1", "approve", "alice", hash, "always"));
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].type, "policy.updated");
  EXPECT_EQ(r.events[1].data["allow"], Json::array({"write_file:notes/\\[draft\\]\\*.txt"}));
}

// A file tool's decision without a subject (from before decide recorded
// one, or a call with no path) would only give a rule for every path of
// the tool: the grant counts once instead.
TEST_F(ApproveTest, AllowAlwaysForAFileToolWithoutASubjectAddsNoRule) {
  AskSpec spec;
  spec.tool = "delete_file";
  spec.args = {{"path", "old.log"}};
  const std::string hash = Hold(spec);
  StageResult r = Respond(Response("r1", "approve", "alice", hash, "always"));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.granted");
  EXPECT_TRUE(log_.Of("policy.updated").empty());
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, topics_.execute()) << "the call itself is granted";
}

TEST_F(ApproveTest, AlwaysNeedsTheWholeQuorumToSayAlways) {
  AskSpec spec;
  spec.quorum = 2;
  const std::string hash = Hold(spec);
  Respond(Response("r1", "approve", "alice", hash, "always"));
  StageResult r = Respond(Response("r1", "approve", "bob", hash, "once"));
  EXPECT_TRUE(log_.Of("policy.updated").empty());
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(Json::parse(r.outputs[0].message.value)["approval"]["scope"], "once");
}

TEST_F(ApproveTest, AResponseReadAgainAfterACrashReEmitsItsOutput) {
  const std::string hash = Hold(AskSpec{});
  const StageContext ctx = Ctx(77);
  const Message m = Signed(Response("r1", "approve", "alice", hash), ctx.now_us);
  StageResult first = stage_.Process(m, ctx, log_);
  log_.Append(first.events, &stage_);
  StageResult again = stage_.Process(m, ctx, log_);
  EXPECT_TRUE(again.events.empty());
  ASSERT_EQ(again.outputs.size(), 1u);
  EXPECT_EQ(again.outputs[0].message.value, first.outputs[0].message.value);
}

// Approvers are authenticated on every path (docs/trust.md): a response
// counts only when its signature proves who sent it.
TEST_F(ApproveTest, AnUnsignedResponseCountsForNothing) {
  const std::string hash = Hold(AskSpec{});
  Approver("alice");  // alice exists; her name is not her signature
  Message unsigned_m = Msg(topics_.approval_responses(), Response("r1", "approve", "alice", hash));
  StageResult r = Deliver(unsigned_m);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.refused");
  EXPECT_EQ(r.events[0].data["code"], "E_UNAUTHENTICATED");
  EXPECT_EQ(r.events[0].org_id, "unknown") << "not filed into the request it names";
  EXPECT_FALSE(r.events[0].data.contains("approver")) << "no identity was proven";
  EXPECT_EQ(r.events[0].data["claimed_approver"], "alice");
  EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(r.events[0].BodyJson()).ok());
  EXPECT_TRUE(r.outputs.empty());
  // Signed by a key nobody registered, and signed by alice's key but with
  // the bytes changed afterwards: refused alike.
  std::string pem, pub;
  ASSERT_TRUE(GenerateEd25519(&pem, &pub).ok());
  JwtSigner stranger;
  ASSERT_TRUE(JwtSigner::FromPem(pem, &stranger, KeyIdOfPublicKey(pub)).ok());
  Message forged = Msg(topics_.approval_responses(), Response("r1", "approve", "alice", hash));
  forged.headers[kHeaderAuth] =
      SignResponse(stranger, "alice", "org-1", "r1", forged.value, (kT0 + 2'000'000) / 1'000'000);
  Message tampered = Signed(Response("r1", "deny", "alice", hash));
  tampered.value = Response("r1", "approve", "alice", hash).dump();
  for (const Message* m : {&forged, &tampered}) {
    StageResult f = Deliver(*m);
    ASSERT_EQ(f.events.size(), 1u);
    EXPECT_EQ(f.events[0].data["code"], "E_UNAUTHENTICATED");
    EXPECT_EQ(f.events[0].org_id, "unknown");
    EXPECT_TRUE(f.outputs.empty());
  }
  RequestState st = State("r1");
  EXPECT_TRUE(st.approval_pending());
  EXPECT_TRUE(st.grants.empty());
  EXPECT_EQ(stage_.pending(), 1u);
}

TEST_F(ApproveTest, AResponseSignedLongerAgoThanTheSkewIsRefused) {
  const std::string hash = Hold(AskSpec{});
  const int64_t at = kT0 + 2'000'000;
  Message old = Signed(Response("r1", "approve", "alice", hash), at - kDefaultMaxSkewUs - 2'000'000);
  StageResult r = Deliver(old, at);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.refused");
  EXPECT_EQ(r.events[0].data["code"], "E_UNAUTHENTICATED");
  EXPECT_TRUE(r.outputs.empty());
  EXPECT_TRUE(State("r1").approval_pending());
}

// The approver recorded is the signed identity; the body's "approver" is
// optional and, when present, must be that identity.
TEST_F(ApproveTest, TheApproverIsWhoSignedNotWhatTheBodySays) {
  AskSpec spec;
  spec.quorum = 2;
  const std::string hash = Hold(spec);
  // alice signs a response that says bob approved: refused, recorded as alice's.
  StageResult claim = Deliver(Signed(Response("r1", "approve", "bob", hash), kT0 + 2'000'000, "alice"));
  ASSERT_EQ(claim.events.size(), 1u);
  EXPECT_EQ(claim.events[0].type, "approval.refused");
  EXPECT_EQ(claim.events[0].data["code"], "E_UNAUTHENTICATED");
  EXPECT_EQ(claim.events[0].data["approver"], "alice");
  EXPECT_EQ(claim.events[0].data["claimed_approver"], "bob");
  EXPECT_TRUE(State("r1").grants.empty()) << "bob's name counted for nothing";
  // Without an approver field, the signer is the approver.
  Json anonymous = Response("r1", "approve", "x", hash);
  anonymous.erase("approver");
  StageResult a = Deliver(Signed(anonymous, kT0 + 2'000'000, "alice"));
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].type, "approval.granted");
  EXPECT_EQ(a.events[0].data["approver"], "alice");
  // alice again, under bob's name: still alice, still one grant.
  StageResult again = Deliver(Signed(Response("r1", "approve", "bob", hash), kT0 + 2'000'000, "alice"));
  ASSERT_EQ(again.events.size(), 1u);
  EXPECT_EQ(again.events[0].type, "approval.refused");
  EXPECT_EQ(State("r1").grants.size(), 1u);
  EXPECT_TRUE(State("r1").approval_pending()) << "one identity is one vote";
  StageResult b = Respond(Response("r1", "approve", "bob", hash));
  ASSERT_EQ(b.outputs.size(), 1u);
  EXPECT_EQ(Json::parse(b.outputs[0].message.value)["approval"]["approvers"], Json::array({"alice", "bob"}));
}

// Tenancy: an approver of org-2 cannot reach org-1's request, whatever
// request_id or org_id the response names.
TEST_F(ApproveTest, AnApproverOfAnotherOrgCannotTouchTheRequest) {
  const std::string hash = Hold(AskSpec{});
  StageResult r = Deliver(Signed(Response("r1", "approve", "zed", hash), kT0 + 2'000'000, "zed", "org-2"));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.refused");
  EXPECT_EQ(r.events[0].data["code"], "E_APPROVAL_UNKNOWN") << "org-2 has no request r1";
  EXPECT_NE(r.events[0].org_id, "org-1");
  Json naming = Response("r1", "approve", "zed", hash);
  naming["org_id"] = "org-1";
  StageResult n = Deliver(Signed(naming, kT0 + 2'000'000, "zed", "org-2"));
  ASSERT_EQ(n.events.size(), 1u);
  EXPECT_EQ(n.events[0].data["code"], "E_APPROVER_NOT_ENTITLED");
  EXPECT_NE(n.events[0].org_id, "org-1");
  EXPECT_TRUE(r.outputs.empty() && n.outputs.empty());
  RequestState st = State("r1");
  EXPECT_TRUE(st.approval_pending());
  EXPECT_TRUE(st.grants.empty());
  EXPECT_EQ(history_.size(), 3u) << "org-1's request has only its own events";
}

// Identities are (org, name) (docs/trust.md, issue 28): org-2's alice is
// not org-1's and adds nothing to org-1's quorum; a deployment-wide alice
// cannot exist beside an org's (refused when added, inert if the log had
// one), so within one org's request a name is one person.
TEST_F(ApproveTest, ApproversOfOneNameInTwoOrgsAreTwoIdentitiesAndOnlyTheRequestsOrgsCounts) {
  AskSpec spec;
  spec.quorum = 2;
  const std::string hash = Hold(spec);
  StageResult first = Respond(Response("r1", "approve", "alice", hash));  // org-1's alice
  ASSERT_EQ(first.events.size(), 1u);
  EXPECT_EQ(first.events[0].type, "approval.granted");
  const int64_t at = kT0 + 2'000'000;
  auto signed_as = [&](const JwtSigner& key, const std::string& org) {
    Json naming = Response("r1", "approve", "alice", hash);
    naming["org_id"] = "org-1";
    Message m = Msg(topics_.approval_responses(), naming);
    m.headers[kHeaderAuth] = SignResponse(key, "alice", org, "r1", m.value, at / 1'000'000);
    return m;
  };
  Credential theirs;
  JwtSigner their_key;
  ASSERT_TRUE(
      NewSigningKey("approver_key", "org-2", "alice", {"approver"}, "test", &theirs, &their_key).ok());
  Credential added;
  ASSERT_TRUE(NewCredential({{"kind", "approver_key"},
                             {"org_id", "org-2"},
                             {"identity", "alice"},
                             {"public_key", theirs.public_key}},
                            "admin", "", registry_, &added)
                  .ok())
      << "org-2 may have an alice too";
  registry_.Apply(CredentialAddedEvent(added, kT0));
  StageResult r = Deliver(signed_as(their_key, "org-2"), at);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].data["code"], "E_APPROVER_NOT_ENTITLED");
  EXPECT_TRUE(State("r1").approval_pending()) << "one of two: org-2's alice counts for nothing here";

  Credential wide;
  JwtSigner wide_key;
  ASSERT_TRUE(NewSigningKey("approver_key", "*", "alice", {"approver"}, "test", &wide, &wide_key).ok());
  Credential refused;
  EXPECT_EQ(
      NewCredential(
          {{"kind", "approver_key"}, {"org_id", "*"}, {"identity", "alice"}, {"public_key", wide.public_key}},
          "admin", "", registry_, &refused)
          .code(),
      errc::kConflict);
  registry_.Apply(CredentialAddedEvent(wide, kT0));  // as if the log had it anyway
  StageResult w = Deliver(signed_as(wide_key, "*"), at);
  ASSERT_EQ(w.events.size(), 1u);
  EXPECT_EQ(w.events[0].data["code"], "E_UNAUTHENTICATED")
      << "a name across the deployment-wide line grants nothing";
  EXPECT_TRUE(State("r1").approval_pending());

  StageResult b = Respond(Response("r1", "approve", "bob", hash));
  ASSERT_EQ(b.outputs.size(), 1u) << "org-1's second person completes the quorum";
  EXPECT_EQ(State("r1").grants.size(), 2u);
}

// request_ids are per org: the same id pending in two orgs is two approvals.
TEST_F(ApproveTest, TheSameRequestIdInTwoOrgsIsTwoApprovals) {
  AskSpec one;
  AskSpec two;
  two.org = "org-2";
  two.args = {{"text", "other"}};
  const std::string h1 = Hold(one);
  const std::string h2 = Hold(two);
  EXPECT_EQ(stage_.pending(), 2u);
  StageResult r = Respond(Response("r1", "approve", "alice", h1));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.granted");
  EXPECT_EQ(r.events[0].org_id, "org-1");
  EXPECT_TRUE(State("r1", "org-1").cleared());
  EXPECT_TRUE(State("r1", "org-2").approval_pending()) << "org-2's r1 is untouched";
  EXPECT_EQ(stage_.pending(), 1u);
  StageResult z = Deliver(Signed(Response("r1", "deny", "zed", h2), kT0 + 2'000'000, "zed", "org-2"));
  ASSERT_EQ(z.events.size(), 1u);
  EXPECT_EQ(z.events[0].type, "approval.denied");
  EXPECT_EQ(z.events[0].org_id, "org-2");
  EXPECT_TRUE(State("r1", "org-2").terminal());
  EXPECT_TRUE(State("r1", "org-1").cleared());
  EXPECT_EQ(stage_.pending(), 0u);
}

// Withdrawal (docs/approvals.md): only the request's own agent takes back
// its pending call, signed as itself or by the service on its behalf.
class WithdrawTest : public ApproveTest {
 protected:
  const JwtSigner& Key(const std::string& kind, const std::string& org, const std::string& identity) {
    const std::string k = kind + "/" + org + "/" + identity;
    auto it = keys_.find(k);
    if (it != keys_.end()) return it->second;
    Credential c;
    JwtSigner s;
    EXPECT_TRUE(NewSigningKey(kind, org, identity, {}, "test", &c, &s).ok());
    registry_.Apply(CredentialAddedEvent(c, kT0));
    return keys_.emplace(k, std::move(s)).first->second;
  }
  int64_t Iat() const { return (kT0 + 2'000'000) / 1'000'000; }
  // A request message of agent-1 (org-1), to authenticate as ingest does.
  Message Q1() {
    Message m;
    m.topic = topics_.requests();
    m.value = R"({"request_id":"q1","org_id":"org-1","agent_id":"agent-1"})";
    return m;
  }
  // `r` refused the response (with `code` when given); r1 still waits.
  void ExpectRefused(const StageResult& r, const char* code = nullptr) {
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].type, "approval.refused");
    if (code != nullptr) EXPECT_EQ(r.events[0].data["code"], code);
    EXPECT_TRUE(r.outputs.empty());
  }
  std::map<std::string, JwtSigner> keys_;
};

TEST_F(WithdrawTest, TheAgentWithdrawsItsOwnPendingCallAndItEndsDeniedAsWithdrawn) {
  Hold(AskSpec{});
  StageResult r = Deliver(WithdrawMessage(topics_, Key("agent_key", "org-1", "agent-1"), "org-1", "agent-1",
                                          "r1", "changed my mind", Iat()));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.denied");
  EXPECT_EQ(r.events[0].data["withdrawn"], true);
  EXPECT_EQ(r.events[0].data["approver"], "agent-1");
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("event_data.approval.denied", r.events[0].data).ok());
  ASSERT_EQ(r.outputs.size(), 1u);
  Json result = Json::parse(r.outputs[0].message.value);
  EXPECT_EQ(result["status"], "denied");
  EXPECT_EQ(result["result"]["error"]["code"], "E_WITHDRAWN");
  EXPECT_TRUE(State("r1").terminal());
  EXPECT_EQ(stage_.pending(), 0u);
}

TEST_F(WithdrawTest, TheServiceMayWithdrawOnTheAgentsBehalf) {
  Hold(AskSpec{});
  StageResult r = Deliver(WithdrawMessageOnBehalf(topics_, Key("service_key", "*", "tollgate-api"), "org-1",
                                                  "agent-1", "r1", "cancelled", Iat()));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "approval.denied");
  EXPECT_EQ(r.events[0].data["withdrawn"], true);
}

TEST_F(WithdrawTest, AnotherAgentCannotWithdrawItAndTheApprovalStaysPending) {
  Hold(AskSpec{});
  StageResult r = Deliver(WithdrawMessage(topics_, Key("agent_key", "org-1", "agent-2"), "org-1", "agent-2",
                                          "r1", "not mine", Iat()));
  ExpectRefused(r, approve_errc::kNotEntitled);
  EXPECT_EQ(stage_.pending(), 1u);
}

TEST_F(WithdrawTest, AnAgentCanNeverApproveItsOwnCall) {
  const std::string hash = Hold(AskSpec{});
  Message m = Msg(topics_.approval_responses(), Response("r1", "approve", "agent-1", hash));
  m.headers[kHeaderAuth] =
      SignRequest(Key("agent_key", "org-1", "agent-1"), "org-1", "agent-1", "r1", m.value, Iat());
  ExpectRefused(Deliver(m), approve_errc::kNotEntitled);
  EXPECT_EQ(stage_.pending(), 1u);
}

TEST_F(WithdrawTest, AnApproverCannotWithdrawInTheAgentsName) {
  Hold(AskSpec{});
  Message m = Msg(topics_.approval_responses(), Json{{"request_id", "r1"}, {"decision", "withdraw"}});
  m.headers[kHeaderAuth] = SignResponse(Approver("alice"), "alice", "org-1", "r1", m.value, Iat());
  ExpectRefused(Deliver(m), approve_errc::kNotEntitled);
  EXPECT_EQ(stage_.pending(), 1u);
}

// Requests signed by the service key on an agent's behalf (the MCP
// gateway over HTTP): only a service key, only naming the claimed agent.
TEST_F(WithdrawTest, ARequestOnAnAgentsBehalfIsTheAgentsOnlyWhenAServiceKeySignsIt) {
  Message m = Q1();
  const int64_t now = kT0 + 2'000'000;
  SignedBy by;
  m.headers[kHeaderAuth] =
      SignRequestOnBehalf(Key("service_key", "*", "tollgate-api"), "org-1", "agent-1", "q1", m.value, Iat());
  ASSERT_TRUE(AuthenticateRequest(m, registry_, now, kDefaultMaxSkewUs, &by)) << by.message;
  EXPECT_EQ(by.org_id, "org-1");
  EXPECT_EQ(by.identity, "agent-1");
  EXPECT_EQ(by.via, "tollgate-api");

  // An approver's key posing as the service.
  m.headers[kHeaderAuth] = SignRequestOnBehalf(Approver("alice"), "org-1", "agent-1", "q1", m.value, Iat());
  EXPECT_FALSE(AuthenticateRequest(m, registry_, now, kDefaultMaxSkewUs, &by));
  EXPECT_EQ(by.check, "unknown_key");
  // Another agent's own key with on-behalf claims.
  m.headers[kHeaderAuth] =
      SignRequestOnBehalf(Key("agent_key", "org-1", "agent-2"), "org-1", "agent-1", "q1", m.value, Iat());
  EXPECT_FALSE(AuthenticateRequest(m, registry_, now, kDefaultMaxSkewUs, &by));
  // The service naming one agent in agent_id and another in on_behalf_of.
  Json claims{{"sub", "tollgate-api"},
              {"org_id", "org-1"},
              {"agent_id", "agent-1"},
              {"on_behalf_of", "agent-2"},
              {"on_behalf_org", "org-1"},
              {"request_id", "q1"},
              {"value_sha256", Sha256Hex(m.value)},
              {"iat", Iat()}};
  m.headers[kHeaderAuth] = Key("service_key", "*", "tollgate-api").Sign(claims);
  EXPECT_FALSE(AuthenticateRequest(m, registry_, now, kDefaultMaxSkewUs, &by));
  EXPECT_EQ(by.check, "claims");
}

TEST_F(WithdrawTest, AWithdrawalReleasesTheCallsBudgetReservation) {
  Hold(AskSpec{});
  BudgetLedger ledger;
  const Json request{
      {"org_id", "org-1"}, {"agent_id", "agent-1"}, {"session_id", "sess-1"}, {"tool", "echo"}};
  ledger.ApplyDecision(
      "r1", request, {{"verdict", "ask"}, {"reservation", {{"usd", 0.5}, {"received_at", FormatTime(kT0)}}}});
  ASSERT_EQ(ledger.Find("org-1", "r1")->state, BudgetEntry::State::kReserved);
  StageResult r = Deliver(WithdrawMessage(topics_, Key("agent_key", "org-1", "agent-1"), "org-1", "agent-1",
                                          "r1", "cancelled", Iat()));
  ASSERT_EQ(r.events.size(), 1u);
  ledger.Apply(r.events[0]);
  EXPECT_EQ(ledger.Find("org-1", "r1")->state, BudgetEntry::State::kReleased);
  EXPECT_EQ(ledger.Find("org-1", "r1")->micros(), 0);
}

TEST_F(WithdrawTest, AWithdrawalAfterTheApprovalIsSettledIsRefusedAndChangesNothing) {
  const std::string hash = Hold(AskSpec{});
  ASSERT_EQ(Respond(Response("r1", "approve", "alice", hash)).events[0].type, "approval.granted");
  StageResult r = Deliver(WithdrawMessageOnBehalf(topics_, Key("service_key", "*", "tollgate-api"), "org-1",
                                                  "agent-1", "r1", "too late", Iat()));
  ExpectRefused(r, approve_errc::kSettled);
  EXPECT_EQ(log_.Of("approval.denied").size(), 0u);
}

TEST_F(WithdrawTest, AWithdrawalForAnotherOrgsAgentOfTheSameNameIsRefused) {
  Hold(AskSpec{});
  StageResult r = Deliver(WithdrawMessage(topics_, Key("agent_key", "org-2", "agent-1"), "org-2", "agent-1",
                                          "r1", "not my org", Iat()));
  ExpectRefused(r);
  EXPECT_EQ(stage_.pending(), 1u);
}

TEST_F(WithdrawTest, AServiceSignatureWithoutOnBehalfClaimsOrByARevokedServiceKeyIsNoAgents) {
  Message m = Q1();
  const int64_t now = kT0 + 2'000'000;
  const JwtSigner& service = Key("service_key", "*", "tollgate-api");
  SignedBy by;
  // The request claim set alone, signed by the service: it vouches for no one.
  m.headers[kHeaderAuth] = SignRequest(service, "org-1", "agent-1", "q1", m.value, Iat());
  EXPECT_FALSE(AuthenticateRequest(m, registry_, now, kDefaultMaxSkewUs, &by));
  EXPECT_EQ(by.check, "claims");
  // A revoked service key.
  Credential c;
  ASSERT_TRUE(registry_.Find(KeyIdOfPublicKey(service.public_b64url()), &c));
  registry_.Apply(CredentialRevokedEvent(c, "test", "rotated", kT0));
  m.headers[kHeaderAuth] = SignRequestOnBehalf(service, "org-1", "agent-1", "q1", m.value, Iat());
  EXPECT_FALSE(AuthenticateRequest(m, registry_, now, kDefaultMaxSkewUs, &by));
  EXPECT_EQ(by.check, "unknown_key");
}

TEST(RequestStateApprovals, SettledFollowsTheQuorum) {
  auto ask = MakeAsk(AskSpec{}, kT0);
  std::vector<Event> ev = ask.events;
  auto add = [&](const std::string& type, Json data, const std::string& disc) {
    Event e = ev[0];
    e.type = type;
    e.id = MakeRequestEventId(e.org_id, type, e.request_id, disc);
    e.data = std::move(data);
    ev.push_back(e);
  };
  add("approval.requested",
      {{"approvers_needed", 3}, {"deadline", FormatTime(kT0)}, {"args_hash", std::string(64, 'a')}}, "");
  add("approval.granted", {{"approver", "a"}, {"scope", "once"}}, "approver:a");
  add("approval.granted", {{"approver", "a"}, {"scope", "once"}}, "approver:a2");
  add("approval.granted", {{"approver", "b"}, {"scope", "once"}}, "approver:b");
  RequestState st = Summarize(ev);
  EXPECT_TRUE(st.approval_pending());
  EXPECT_EQ(st.grants.size(), 2u);
  EXPECT_FALSE(st.cleared());
  auto plan = PlanRedrive(ev, Topics{}, kT0);
  EXPECT_FALSE(plan.has_value()) << "a pending approval is not re-asked";
  add("approval.granted", {{"approver", "c"}, {"scope", "once"}}, "approver:c");
  st = Summarize(ev);
  EXPECT_TRUE(st.cleared());
  EXPECT_FALSE(st.terminal());
  plan = PlanRedrive(ev, Topics{}, kT0);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->message.topic, Topics{}.execute()) << "granted but not executed goes to execute";
  // A denial after the quorum changes nothing.
  add("approval.denied", {{"approver", "d"}, {"scope", "once"}}, "approver:d");
  EXPECT_TRUE(Summarize(ev).cleared());
}

TEST(RequestStateApprovals, AnAskNotYetRequestedIsReDrivenToApprove) {
  auto ask = MakeAsk(AskSpec{}, kT0);
  auto plan = PlanRedrive(ask.events, Topics{}, kT0);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->message.topic, Topics{}.approve());
}

}  // namespace
}  // namespace tollgate
