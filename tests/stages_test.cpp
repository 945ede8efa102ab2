// The stage cores as pure functions: a message, a context and a log view in,
// events and outputs out. No Kafka, no RocksDB. Agents sign their requests
// for real (docs/trust.md): Ed25519 keys in a CredentialRegistry.
#include <gtest/gtest.h>

#include <map>

#include "core/auth.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "core/redact.h"
#include "core/request_state.h"
#include "core/sha256.h"
#include "core/unproven.h"
#include "decide/decide_stage.h"
#include "deploy/reconciler.h"
#include "execute/execute_stage.h"
#include "ingest/ingest_stage.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

constexpr int64_t kT0 = 1'790'000'000'000'000;

// The log as a vector; seqs assigned as events are "appended". A request is
// (org, request_id), as in the real log.
class VectorLog : public testing::MemoryLog {
 public:
  using MemoryLog::Append;
  void Append(const StageResult& r) { Append(r.events); }
  std::vector<Event> Of(const std::string& org, const std::string& rid) const {
    std::vector<Event> out;
    EventsOfRequest(org, rid, &out);
    return out;
  }
};

// Agents and their registered keys, as `tollgate agents add` makes them.
class Agents {
 public:
  // The signer of (org, agent); its key is registered on first use.
  const JwtSigner& Key(const std::string& org, const std::string& agent) {
    const std::string k = org + "\n" + agent;
    auto it = signers_.find(k);
    if (it != signers_.end()) return it->second;
    Credential c;
    JwtSigner s;
    EXPECT_TRUE(NewSigningKey("agent_key", org, agent, {"agent"}, "test", &c, &s).ok());
    registry.Apply(CredentialAddedEvent(c, kT0 - 1'000'000));
    creds_[k] = c;
    return signers_.emplace(k, std::move(s)).first->second;
  }
  const Credential& Cred(const std::string& org, const std::string& agent) {
    Key(org, agent);
    return creds_[org + "\n" + agent];
  }
  CredentialRegistry registry;

 private:
  std::map<std::string, JwtSigner> signers_;
  std::map<std::string, Credential> creds_;
};

Message Msg(const Json& j, const std::string& key = "agent-1") {
  Message m;
  m.topic = "tollgate.requests";
  m.key = key;
  m.value = j.dump();
  return m;
}

Json Req(const std::string& rid = "r1", const std::string& org = "o", const std::string& agent = "agent-1") {
  return {{"request_id", rid}, {"org_id", org},  {"agent_id", agent},
          {"session_id", "s"}, {"tool", "echo"}, {"args", {{"text", "hi"}, {"api_key", "k-123"}}}};
}

// `j` as a message signed at `at` by the agent it names (or by `org`/`agent`
// when given), with claims for exactly its bytes.
Message Signed(Agents& agents, const Json& j, int64_t at = kT0, std::string org = "",
               std::string agent = "") {
  if (org.empty()) org = j.value("org_id", "");
  if (agent.empty()) agent = j.value("agent_id", "");
  Message m = Msg(j);
  m.headers[kHeaderAuth] =
      SignRequest(agents.Key(org, agent), org, agent, j.value("request_id", ""), m.value, at / 1'000'000);
  return m;
}

IngestConfig WithAgents(Agents& agents) {
  IngestConfig c;
  c.credentials = &agents.registry;
  return c;
}

// `r` is a refusal: one request.rejected with `code`, filed under `org`, a
// rejected result to the sender and nothing for the next stage.
void ExpectRefused(const StageResult& r, const std::string& code, const std::string& org) {
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.rejected");
  EXPECT_EQ(r.events[0].data["error"]["code"], code) << r.events[0].data.dump();
  EXPECT_EQ(r.events[0].org_id, org);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, "tollgate.results") << "nothing goes on to be decided";
  Json result = Json::parse(r.outputs[0].message.value);
  EXPECT_EQ(result["status"], "rejected");
  EXPECT_EQ(result["result"]["error"]["code"], code);
}

class IngestTest : public ::testing::Test {
 protected:
  StageContext Ctx(int offset) { return {kT0 + offset, "inc/tollgate.requests/0/" + std::to_string(offset)}; }
  Message Signed(const Json& j, int64_t at = kT0) { return tollgate::Signed(agents_, j, at); }
  Agents agents_;
  IngestStage ingest_{WithAgents(agents_)};
  VectorLog log_;
};

TEST_F(IngestTest, AValidRequestIsLoggedRedactedAndForwardedIntact) {
  StageResult r = ingest_.Process(Signed(Req()), Ctx(1), log_);
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = r.events[0];
  EXPECT_EQ(e.type, "request.received");
  EXPECT_EQ(e.org_id, "o");
  EXPECT_EQ(e.agent_id, "agent-1");
  EXPECT_EQ(e.data["signed_by"], agents_.Cred("o", "agent-1").key_id);
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
  std::string canon;
  ASSERT_TRUE(CanonicalBytes(flow["request"], &canon).ok());
  EXPECT_EQ(e.data["content_hash"], Sha256Hex(canon)) << "what later stages check a flow against";
}

TEST_F(IngestTest, ReplayRetryAndConflictAreToldApart) {
  StageResult first = ingest_.Process(Signed(Req()), Ctx(1), log_);
  log_.Append(first);
  // The same Kafka message again (a crash before commit): the same output.
  StageResult replay = ingest_.Process(Signed(Req()), Ctx(1), log_);
  EXPECT_TRUE(replay.events.empty());
  ASSERT_EQ(replay.outputs.size(), 1u);
  EXPECT_EQ(replay.outputs[0].message.value, first.outputs[0].message.value);
  // The agent retries while in flight: nothing new.
  StageResult retry = ingest_.Process(Signed(Req()), Ctx(2), log_);
  EXPECT_TRUE(retry.events.empty());
  EXPECT_TRUE(retry.outputs.empty());
  // Same id, other content: refused, without ending the original.
  Json other = Req();
  other["args"]["text"] = "bye";
  StageResult conflict = ingest_.Process(Signed(other), Ctx(3), log_);
  ASSERT_EQ(conflict.events.size(), 1u);
  EXPECT_EQ(conflict.events[0].data["error"]["code"], "E_DUPLICATE_REQUEST");
  log_.Append(conflict);
  std::vector<Event> history;
  log_.EventsOfRequest("o", "r1", &history);
  EXPECT_FALSE(Summarize(history).terminal());
  // Once finished, a retry gets the recorded outcome.
  Event done = history[0];
  done.type = "decision.made";
  done.id = MakeRequestEventId("o", done.type, "r1");
  done.data = {{"verdict", "deny"}, {"reason", "no"}, {"error_code", "E_POLICY_DENIED"}};
  log_.events_.push_back(done);
  log_.events_.back().seq = log_.events_.size();
  StageResult later = ingest_.Process(Signed(Req()), Ctx(4), log_);
  ASSERT_EQ(later.outputs.size(), 1u);
  Json result = Json::parse(later.outputs[0].message.value);
  EXPECT_EQ(result["status"], "denied");
  EXPECT_EQ(result["log_seq"], log_.events_.size());
}

TEST_F(IngestTest, RejectionsCarryCodesAndDeterministicIds) {
  IngestConfig small = WithAgents(agents_);
  small.max_request_bytes = 100;
  IngestStage tight(small);
  StageResult big = tight.Process(Signed(Req()), Ctx(1), log_);
  ASSERT_EQ(big.events.size(), 1u);
  EXPECT_EQ(big.events[0].data["error"]["code"], "E_REQUEST_TOO_LARGE");
  EXPECT_EQ(big.events[0].org_id, "o") << "signed: filed under the signer";
  EXPECT_EQ(big.events[0].request_id, "r1") << "the signed request_id, though the body was not read";
  // The event id depends only on the request and where the message came from.
  StageResult again = tight.Process(Signed(Req()), Ctx(1), log_);
  EXPECT_EQ(again.events[0].id, big.events[0].id);
  EXPECT_NE(tight.Process(Signed(Req()), Ctx(2), log_).events[0].id, big.events[0].id);
  // Unsigned, its refusal's request_id is derived from its bytes
  // (core/unproven.h), whatever id it names; its event id from where it
  // came from too.
  Json anonymous = Req();
  anonymous.erase("request_id");
  StageResult u1 = ingest_.Process(Msg(anonymous), Ctx(5), log_);
  ASSERT_EQ(u1.events.size(), 1u);
  EXPECT_EQ(u1.events[0].request_id, UnprovenRequestId(Msg(anonymous)));
  EXPECT_EQ(ingest_.Process(Msg(anonymous), Ctx(5), log_).events[0].id, u1.events[0].id);
  StageResult u2 = ingest_.Process(Msg(anonymous), Ctx(6), log_);
  EXPECT_EQ(u2.events[0].request_id, u1.events[0].request_id);
  EXPECT_NE(u2.events[0].id, u1.events[0].id);

  Json bad = Req();
  bad["args"] = 7;
  StageResult r = ingest_.Process(Signed(bad), Ctx(3), log_);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.rejected");
  EXPECT_EQ(r.events[0].request_id, "r1");
  Json result = Json::parse(r.outputs[0].message.value);
  EXPECT_EQ(result["status"], "rejected");
  EXPECT_EQ(result["result"]["error"]["code"], "E_INVALID_REQUEST");
  EXPECT_EQ(r.outputs[0].log_seq_of_event, 0);
  // The id was never received, so a corrected request may use it.
  log_.Append(r);
  StageResult fixed = ingest_.Process(Signed(Req()), Ctx(4), log_);
  ASSERT_EQ(fixed.events.size(), 1u);
  EXPECT_EQ(fixed.events[0].type, "request.received");
}

// Authentication (docs/trust.md). A request the signature does not prove is
// filed under org "unknown", with what it claimed kept aside, and nothing
// of it reaches decide or the history of the request it names.
TEST_F(IngestTest, IngestRefusesAnUnsignedRequest) {
  agents_.Key("o", "agent-1");  // the agent exists; its name is not its signature
  StageResult r = ingest_.Process(Msg(Req()), Ctx(1), log_);
  ExpectRefused(r, "E_UNAUTHENTICATED", "unknown");
  EXPECT_EQ(r.events[0].agent_id, "unknown");
  EXPECT_EQ(r.events[0].data["check"], "header");
  EXPECT_EQ(r.events[0].data["claimed"]["org_id"], "o");
  EXPECT_EQ(r.events[0].data["claimed"]["agent_id"], "agent-1");
  log_.Append(r);
  EXPECT_TRUE(log_.Of("o", "r1").empty()) << "nothing filed under the org it names";
  // An ingest with no registry accepts nothing, signed or not.
  IngestStage closed{IngestConfig{}};
  ExpectRefused(closed.Process(Signed(Req()), Ctx(2), log_), "E_UNAUTHENTICATED", "unknown");
}

TEST_F(IngestTest, IngestRefusesARequestSignedWithAnotherKey) {
  const Credential& real = agents_.Cred("o", "agent-1");
  std::string pem, pub;
  ASSERT_TRUE(GenerateEd25519(&pem, &pub).ok());
  // Another key claiming to be agent-1's (its kid), and another key with
  // no kid at all.
  JwtSigner impostor, bare;
  ASSERT_TRUE(JwtSigner::FromPem(pem, &impostor, real.key_id).ok());
  ASSERT_TRUE(JwtSigner::FromPem(pem, &bare).ok());
  int n = 1;
  for (const JwtSigner* s : {&impostor, &bare}) {
    Message m = Msg(Req());
    m.headers[kHeaderAuth] = SignRequest(*s, "o", "agent-1", "r1", m.value, kT0 / 1'000'000);
    StageResult r = ingest_.Process(m, Ctx(n++), log_);
    ExpectRefused(r, "E_UNAUTHENTICATED", "unknown");
    EXPECT_EQ(r.events[0].data["check"], "signature");
    log_.Append(r);
  }
  // A key registered for another agent does not sign for agent-1.
  Message other = Msg(Req());
  other.headers[kHeaderAuth] =
      SignRequest(agents_.Key("o", "agent-2"), "o", "agent-1", "r1", other.value, kT0 / 1'000'000);
  ExpectRefused(ingest_.Process(other, Ctx(3), log_), "E_UNAUTHENTICATED", "unknown");
  // Nor does any key for an agent nobody registered.
  Json ghost = Req("r1", "o", "ghost");
  Message g = Msg(ghost);
  g.headers[kHeaderAuth] = SignRequest(impostor, "o", "ghost", "r1", g.value, kT0 / 1'000'000);
  StageResult unknown = ingest_.Process(g, Ctx(4), log_);
  ExpectRefused(unknown, "E_UNAUTHENTICATED", "unknown");
  EXPECT_EQ(unknown.events[0].data["check"], "unknown_agent");
  EXPECT_TRUE(log_.Of("o", "r1").empty());
}

TEST_F(IngestTest, IngestRefusesARequestWhoseBytesChangedAfterSigning) {
  Message m = Signed(Req());
  Json changed = Req();
  changed["args"]["text"] = "rm -rf /";
  m.value = changed.dump();
  StageResult r = ingest_.Process(m, Ctx(1), log_);
  ExpectRefused(r, "E_UNAUTHENTICATED", "unknown");
  EXPECT_EQ(r.events[0].data["check"], "value_sha256");
  log_.Append(r);
  EXPECT_TRUE(log_.Of("o", "r1").empty());
  // Nor does the same signature over other whitespace pass.
  Message spaced = Signed(Req());
  spaced.value += " ";
  ExpectRefused(ingest_.Process(spaced, Ctx(2), log_), "E_UNAUTHENTICATED", "unknown");
}

// The body speaks for the signer only. The signer is proven, so the refusal
// is its own (under its org), never the org or agent the body names.
TEST_F(IngestTest, IngestRefusesARequestWhoseBodyNamesAnotherOrgOrAgentThanItsSignature) {
  agents_.Key("o2", "agent-1");
  agents_.Key("o", "agent-2");
  struct Case {
    Json body;
    const char* named_org;
  };
  const Case cases[] = {
      {Req("r1", "o2", "agent-1"), "o2"},  // another org
      {Req("r1", "o", "agent-2"), "o"},    // another agent of its org
  };
  int n = 1;
  for (const Case& c : cases) {
    // Signed by agent-1 of org o, claims and all; only the body differs.
    StageResult r = ingest_.Process(tollgate::Signed(agents_, c.body, kT0, "o", "agent-1"), Ctx(n++), log_);
    ExpectRefused(r, "E_UNAUTHENTICATED", "o");
    EXPECT_EQ(r.events[0].agent_id, "agent-1") << "the proven signer, not the one named";
    EXPECT_EQ(r.events[0].data["check"], "claims");
    log_.Append(r);
  }
  EXPECT_TRUE(log_.Of("o2", "r1").empty()) << "nothing in the org the body named";
  // The signed request_id binds too.
  Message m = Msg(Req("r2"));
  m.headers[kHeaderAuth] =
      SignRequest(agents_.Key("o", "agent-1"), "o", "agent-1", "r1", m.value, kT0 / 1'000'000);
  StageResult rid = ingest_.Process(m, Ctx(9), log_);
  ASSERT_EQ(rid.events.size(), 1u);
  EXPECT_EQ(rid.events[0].data["error"]["code"], "E_UNAUTHENTICATED");
  EXPECT_EQ(rid.events[0].data["check"], "claims");
  for (const Event& e : log_.events_) EXPECT_NE(e.type, "request.received");
}

// Only the signature's time failed: the signer is proven, so the refusal
// is filed under it.
TEST_F(IngestTest, IngestRefusesASignatureOlderThanTheSkewAndFilesItUnderTheProvenSigner) {
  const int64_t now = Ctx(1).now_us;
  StageResult r = ingest_.Process(Signed(Req(), now - kDefaultMaxSkewUs - 1'000'000), Ctx(1), log_);
  ExpectRefused(r, "E_SIGNATURE_EXPIRED", "o");
  EXPECT_EQ(r.events[0].agent_id, "agent-1");
  EXPECT_EQ(r.events[0].request_id, "r1");
  EXPECT_EQ(r.events[0].data["check"], "iat");
  // Within the skew, either side, it is fine; beyond it in the future, not
  // (E_UNAUTHENTICATED, though the signer is proven).
  EXPECT_EQ(
      ingest_.Process(Signed(Req("r2"), now - kDefaultMaxSkewUs + 2'000'000), Ctx(2), log_).events[0].type,
      "request.received");
  EXPECT_EQ(
      ingest_.Process(Signed(Req("r3"), now + kDefaultMaxSkewUs - 2'000'000), Ctx(3), log_).events[0].type,
      "request.received");
  StageResult future = ingest_.Process(Signed(Req("r4"), now + kDefaultMaxSkewUs + 2'000'000), Ctx(4), log_);
  ExpectRefused(future, "E_UNAUTHENTICATED", "o");
  EXPECT_EQ(future.events[0].data["check"], "iat");
}

TEST_F(IngestTest, IngestRefusesARequestSignedWithARevokedKey) {
  Message m = Signed(Req());
  StageResult ok = ingest_.Process(m, Ctx(1), log_);
  ASSERT_EQ(ok.events.size(), 1u);
  EXPECT_EQ(ok.events[0].type, "request.received") << "valid before the revocation";
  agents_.registry.Apply(CredentialRevokedEvent(agents_.Cred("o", "agent-1"), "admin", "leaked", kT0));
  StageResult r = ingest_.Process(Signed(Req("r2")), Ctx(2), log_);
  ExpectRefused(r, "E_UNAUTHENTICATED", "unknown");
  EXPECT_EQ(r.events[0].data["check"], "revoked");
}

TEST_F(IngestTest, ASignedRequestWithoutAnIdGetsOneFromItsSignatureAndAReplayedCopyIsTheSameRequest) {
  Json anonymous = Req();
  anonymous.erase("request_id");
  const Message m = Signed(anonymous);
  StageResult first = ingest_.Process(m, Ctx(1), log_);
  ASSERT_EQ(first.events.size(), 1u);
  EXPECT_EQ(first.events[0].type, "request.received");
  const std::string rid = first.events[0].request_id;
  EXPECT_EQ(rid.rfind("j-", 0), 0u) << rid;
  EXPECT_EQ(first.events[0].data["request"]["request_id"], rid);
  log_.Append(first);
  // Someone replays the very same signed message (another offset): the same
  // request, in flight, so nothing new.
  StageResult replayed = ingest_.Process(m, Ctx(2), log_);
  EXPECT_TRUE(replayed.events.empty());
  EXPECT_TRUE(replayed.outputs.empty());
  EXPECT_EQ(log_.Of("o", rid).size(), 1u);
  // The agent signing the same body again later is a new request.
  StageResult later = ingest_.Process(Signed(anonymous, kT0 + 1'000'000), Ctx(3), log_);
  ASSERT_EQ(later.events.size(), 1u);
  EXPECT_EQ(later.events[0].type, "request.received");
  EXPECT_NE(later.events[0].request_id, rid);
}

TEST_F(IngestTest, RequestIdsArePerOrgSoAnotherOrgUsingAnIdDoesNotMakeItADuplicate) {
  StageResult mine = ingest_.Process(Signed(Req("r1", "o1", "agent-1")), Ctx(1), log_);
  ASSERT_EQ(mine.events.size(), 1u);
  log_.Append(mine);
  Json theirs = Req("r1", "o2", "agent-1");
  theirs["args"]["text"] = "other";
  StageResult r = ingest_.Process(Signed(theirs), Ctx(2), log_);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.received") << "o2's r1 is its own request";
  EXPECT_EQ(r.events[0].org_id, "o2");
  EXPECT_NE(r.events[0].id, mine.events[0].id);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, "tollgate.decide");
  log_.Append(r);
  std::vector<Event> o1 = log_.Of("o1", "r1");
  ASSERT_EQ(o1.size(), 1u) << "o1's request is untouched";
  EXPECT_EQ(o1[0].id, mine.events[0].id);
  EXPECT_FALSE(Summarize(o1).terminal());
  EXPECT_EQ(log_.Of("o2", "r1").size(), 1u);
  // Within one org, the id still de-duplicates.
  Json conflict = Req("r1", "o1", "agent-1");
  conflict["args"]["text"] = "bye";
  StageResult dup = ingest_.Process(Signed(conflict), Ctx(3), log_);
  ASSERT_EQ(dup.events.size(), 1u);
  EXPECT_EQ(dup.events[0].data["error"]["code"], "E_DUPLICATE_REQUEST");
}

// Whoever can write to tollgate.decide: decide acts only on a flow that is
// what ingest received, as the log records it. A refusal is filed under org
// "unknown" and leaves the request it names alone.
class DecideFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PolicyPtr policy;
    ASSERT_TRUE(LoadPolicyFile(TOLLGATE_SOURCE_DIR "/config/default-policy.yaml", &policy).ok());
    DecideConfig c;
    c.topics = topics_;
    decide_ = std::make_unique<DecideStage>(c);
    decide_->UsePolicy(policy);
    // The victim: a request ingest received.
    Json victim = Req("v1");
    victim["args"] = {{"text", "hi"}};
    StageResult r = ingest_.Process(Signed(agents_, victim), {kT0, "i/t/0/1"}, log_);
    ASSERT_EQ(r.events.size(), 1u);
    log_.Append(r);
    ASSERT_TRUE(Flow::FromJson(Json::parse(r.outputs[0].message.value), &victim_));
  }
  StageResult Decide(const Flow& f, int n) {
    return decide_->Process(MessageFor(topics_.decide(), f.request, f.ToJson()),
                            {kT0 + n, "i/d/0/" + std::to_string(n)}, log_);
  }
  Topics topics_;
  Agents agents_;
  IngestStage ingest_{WithAgents(agents_)};
  std::unique_ptr<DecideStage> decide_;
  VectorLog log_;
  Flow victim_;
};

TEST_F(DecideFlowTest, DecideRefusesAFlowWhoseRequestWasNeverReceived) {
  Flow forged = victim_;
  forged.request["request_id"] = "never";
  StageResult r = Decide(forged, 1);
  ExpectRefused(r, "E_NOT_IN_LOG", "unknown");
  EXPECT_EQ(r.events[0].data["claimed"]["request_id"], "never");
  EXPECT_EQ(r.events[0].data["stage"], "decide");
  log_.Append(r);
  EXPECT_TRUE(log_.Of("o", "never").empty());
  // Nor under another org than the one that received it.
  Flow elsewhere = victim_;
  elsewhere.request["org_id"] = "o2";
  ExpectRefused(Decide(elsewhere, 2), "E_NOT_IN_LOG", "unknown");
  std::vector<Event> history = log_.Of("o", "v1");
  ASSERT_EQ(history.size(), 1u) << "the victim's history is unchanged";
  EXPECT_EQ(history[0].type, "request.received");
}

TEST_F(DecideFlowTest, DecideRefusesAFlowWhoseArgsDifferFromTheLogs) {
  // Other args, with and without a matching args_hash.
  Flow forged = victim_;
  forged.request["args"] = {{"text", "bye"}};
  Flow rehashed = forged;
  rehashed.args_hash = ArgsHash(rehashed.request["args"]);
  Flow late = victim_;
  late.received_at = FormatTime(kT0 + 60'000'000);
  int n = 1;
  for (const Flow* f : {&forged, &rehashed, &late}) {
    StageResult r = Decide(*f, n++);
    ExpectRefused(r, "E_FLOW_MISMATCH", "unknown");
    EXPECT_EQ(r.events[0].data["claimed"]["request_id"], "v1");
    for (const Event& e : r.events) EXPECT_NE(e.type, "decision.made");
    log_.Append(r);
  }
  std::vector<Event> history = log_.Of("o", "v1");
  ASSERT_EQ(history.size(), 1u) << "the victim's history is unchanged";
  EXPECT_FALSE(Summarize(history).terminal());
  // The genuine flow is decided as usual.
  StageResult ok = Decide(victim_, 9);
  ASSERT_EQ(ok.events.size(), 1u);
  EXPECT_EQ(ok.events[0].type, "decision.made");
  EXPECT_EQ(ok.events[0].org_id, "o");
  EXPECT_EQ(ok.events[0].data["verdict"], "allow");
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
    Json req = {{"request_id", "r"}, {"org_id", "o"}, {"agent_id", "a"},
                {"session_id", "s"}, {"tool", tool},  {"args", std::move(args)}};
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
  EXPECT_EQ(decide("http_request", {{"method", "GET"}, {"url", "https://example.com/x"}})["verdict"],
            "allow");
  EXPECT_EQ(decide("delete_file", {{"path", "/etc/shadow"}})["error_code"], "E_POLICY_DENIED");
  EXPECT_EQ(decide("read_file", {{"path", "app/.env"}})["error_code"], "E_POLICY_DENIED");
  EXPECT_EQ(decide("execute_command", {{"command", "cat ~/.ssh/id_rsa"}})["error_code"], "E_POLICY_DENIED");
  EXPECT_EQ(decide("teleport", Json::object())["error_code"], "E_UNKNOWN_TOOL");
}

TEST(Reconcile, RedrivesEachUnfinishedStepAndEndsWhatItCannot) {
  Topics topics;
  Agents agents;
  IngestStage ingest{WithAgents(agents)};
  VectorLog log;
  Json plain = Req("p1");
  plain["args"] = {{"text", "hi"}};
  log.Append(ingest.Process(Signed(agents, plain), {kT0 + 1, "i/t/0/1"}, log));
  std::vector<Event> ev;
  log.EventsOfRequest("o", "p1", &ev);
  ASSERT_EQ(ev.size(), 1u);
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
  log.Append(decide.Process(to_decide, {kT0 + 2, "i/d/0/1"}, log));
  log.EventsOfRequest("o", "p1", &ev);
  plan = PlanRedrive(ev, topics, 5);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->message.topic, "tollgate.execute");

  ExecuteConfig execute_config;
  execute_config.topics = topics;
  ExecuteStage execute{execute_config};
  log.Append(execute.Process(plan->message, {kT0 + 3, "i/e/0/1"}, log));
  log.EventsOfRequest("o", "p1", &ev);
  EXPECT_FALSE(PlanRedrive(ev, topics, 5)) << "finished requests are left alone";
  // A re-sent copy to execute does not run the tool again.
  EXPECT_TRUE(execute.Process(plan->message, {kT0 + 4, "i/e/0/2"}, log).events.empty());

  // A request whose secrets were redacted cannot be re-driven: it is ended.
  log.Append(ingest.Process(Signed(agents, Req("s1")), {kT0 + 1, "i/t/0/2"}, log));
  log.EventsOfRequest("o", "s1", &ev);
  plan = PlanRedrive(ev, topics, 5);
  ASSERT_TRUE(plan);
  ASSERT_TRUE(plan->event);
  EXPECT_EQ(plan->event->data["error"]["code"], "E_REQUEST_LOST");
  EXPECT_EQ(plan->message.topic, "tollgate.results");
}

}  // namespace
}  // namespace tollgate
