// Guards that once had no test (issue 28): each test here fails when the
// check it names is removed (scripts/mutate.sh removes each in turn).
//
// - the approver role: a key registered with only the `auditor` role signs
//   an approval on approval-responses (core/auth.cpp AuthenticateResponse);
// - a known key id with a bad signature, on a response and on a request
//   (core/auth.cpp Check: every other forged message in the suites carries
//   an unknown kid, so the lookup refuses it before the signature is read);
// - what executes is what was decided: a file tool decided for one path
//   does not open another (execute/invocation_check.cpp, the subject).
//
// The real parts the stage suites use: the approve and execute stages as
// pure cores over one in-memory log, responses checked by the deployment's
// RegistryAuthenticator against real Ed25519 keys folded from
// credential.added, and write_file writing into a scratch workspace.
#include <gtest/gtest.h>

#include <filesystem>

#include "approve/approve_stage.h"
#include "approve_util.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "core/invocation.h"
#include "core/jwt.h"
#include "execute/execute_stage.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

using testing::AskSpec;
using testing::MakeAsk;
using testing::Response;

constexpr int64_t kT0 = 1'790'000'000'000'000;
constexpr int64_t kAt = kT0 + 2'000'000;  // when responses are signed and read

// `token` (a JWT) with one byte of its signature flipped: still 64 bytes of
// strict base64url, so only the signature check can refuse it.
std::string WithFlippedSignatureByte(const std::string& token) {
  const size_t dot = token.rfind('.');
  std::string sig;
  EXPECT_TRUE(Base64UrlDecode(token.substr(dot + 1), &sig));
  sig[7] ^= 0x01;
  return token.substr(0, dot + 1) + Base64UrlEncode(sig);
}

// A write_file call held for approval, answered on approval-responses, and
// the flow approve forwards run by execute: one log, as the pipeline has.
class GuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ApproveConfig ac;
    ac.topics = topics_;
    ac.authenticate = RegistryAuthenticator(&registry_, kDefaultMaxSkewUs);
    approve_ = std::make_unique<ApproveStage>(ac);
    auto p = std::make_shared<ExecutePolicy>(DefaultExecutePolicy(dir_.path()));
    p->run_as = "";
    ExecuteConfig ec;
    ec.topics = topics_;
    ec.policy = p;
    execute_ = std::make_unique<ExecuteStage>(ec);
  }
  StageContext Ctx(int64_t at = kAt) { return {at, "guard/topic/0/" + std::to_string(next_++)}; }
  // A registered key of `kind` for `identity` of org-1 with `roles`.
  JwtSigner Key(const std::string& kind, const std::string& identity, std::vector<std::string> roles) {
    Credential c;
    JwtSigner s;
    EXPECT_TRUE(NewSigningKey(kind, "org-1", identity, std::move(roles), "test", &c, &s).ok());
    registry_.Apply(CredentialAddedEvent(c, kT0));
    return s;
  }
  void Append(const StageResult& r) {
    log_.Append(r.events);
    approve_->OnAppended(r.events);
  }
  // decide's request.received + decision.made for a write_file of `args`
  // decided (verdict, subject) as a call to `decided_path`; the flow.
  Flow Decide(const std::string& rid, const std::string& verdict, const Json& args,
              const std::string& decided_path) {
    AskSpec spec;
    spec.request_id = rid;
    spec.agent = "a1";
    spec.tool = "write_file";
    spec.args = args;
    spec.subject = FileSubject("write_file", {{"path", decided_path}});
    auto ask = MakeAsk(spec, kT0);
    if (verdict != "ask") {
      for (Json* d : {&ask.events[1].data, &ask.flow.decision}) {
        (*d)["verdict"] = verdict;
        d->erase("approval");
      }
    }
    log_.Append(ask.events);
    return ask.flow;
  }
  // A write_file of `path` held for one approver's grant; its args hash.
  std::string Held(const std::string& rid, const std::string& path) {
    const Json args{{"path", path}, {"content", "x"}};
    Flow f = Decide(rid, "ask", args, path);
    StageResult r = approve_->Process(MessageFor(topics_.approve(), f.request, f.ToJson()), Ctx(), log_);
    EXPECT_EQ(ToExecute(r), nullptr) << "held";
    Append(r);
    return f.args_hash;
  }
  // What `r` sends to the execute topic (approve's forwarded flow), or null.
  const Message* ToExecute(const StageResult& r) const {
    for (const auto& o : r.outputs) {
      if (o.message.topic == topics_.execute()) return &o.message;
    }
    return nullptr;
  }
  // An approval response of `rid` signed by `signer` as `identity`.
  Message SignedResponse(const JwtSigner& signer, const std::string& identity, const std::string& rid,
                         const std::string& args_hash) {
    Json body = Response(rid, "approve", identity, args_hash);
    Message m = MessageFor(topics_.approval_responses(), {{"request_id", rid}, {"agent_id", "a1"}}, body);
    m.headers[kHeaderAuth] = SignResponse(signer, identity, "org-1", rid, m.value, kAt / 1'000'000);
    return m;
  }
  StageResult Answer(const Message& m) {
    StageResult r = approve_->Process(m, Ctx(), log_);
    Append(r);
    return r;
  }
  // Runs what approve or decide sent to execute, deferred work included.
  StageResult Execute(const Message& m) {
    StageResult r = execute_->Process(m, Ctx(), log_);
    log_.Append(r.events);
    if (r.deferred) {
      StageResult done = r.deferred();
      log_.Append(done.events);
      for (auto& e : done.events) r.events.push_back(e);
      for (auto& o : done.outputs) r.outputs.push_back(o);
    }
    return r;
  }
  RequestState State(const std::string& rid) {
    history_.clear();
    log_.EventsOfRequest("org-1", rid, &history_);
    return Summarize(history_);
  }
  // org-1's events of `rid` of `type`.
  std::vector<Event> Logged(const std::string& rid, const std::string& type) {
    std::vector<Event> out;
    for (const Event& e : log_.events_) {
      if (e.org_id == "org-1" && e.request_id == rid && e.type == type) out.push_back(e);
    }
    return out;
  }
  // A refused response: approval.refused, E_UNAUTHENTICATED, naming `check`
  // (core/auth.h SignedBy::check), with no output and no grant.
  void ExpectRefused(const StageResult& r, const std::string& check) {
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].type, "approval.refused");
    EXPECT_EQ(r.events[0].data["code"], "E_UNAUTHENTICATED");
    EXPECT_EQ(r.events[0].data.value("message", "").rfind(check + ":", 0), 0u) << r.events[0].data.dump();
    EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(r.events[0].BodyJson()).ok());
    EXPECT_TRUE(r.outputs.empty()) << "nothing goes to execute or to the agent";
  }
  std::string Workspace() const { return dir_.path() + "/workspaces/org-1/a1"; }

  testing::TempDir dir_;
  Topics topics_;
  CredentialRegistry registry_;
  std::unique_ptr<ApproveStage> approve_;
  std::unique_ptr<ExecuteStage> execute_;
  testing::MemoryLog log_;
  std::vector<Event> history_;
  int next_ = 1;
};

// docs/trust.md, "Roles are scoped": an auditor reads the log; only an
// approver (or admin) key counts on approval-responses.
TEST_F(GuardTest, AKeyWithOnlyTheAuditorRoleCannotApproveAndTheCallStaysPendingAndUnrun) {
  const std::string hash = Held("w1", "notes.txt");
  const JwtSigner audrey = Key("approver_key", "audrey", {"auditor"});
  StageResult r = Answer(SignedResponse(audrey, "audrey", "w1", hash));
  ExpectRefused(r, "roles");
  EXPECT_EQ(r.events[0].org_id, "unknown") << "no approver was proven: not filed into the request it names";
  EXPECT_FALSE(r.events[0].data.contains("approver"));
  EXPECT_EQ(r.events[0].data["claimed_approver"], "audrey");
  bool logged = false;
  for (const Event& e : log_.events_) logged |= e.id == r.events[0].id;
  EXPECT_TRUE(logged) << "the refusal is in the log";
  RequestState st = State("w1");
  EXPECT_TRUE(st.approval_pending());
  EXPECT_TRUE(st.grants.empty());
  EXPECT_EQ(approve_->pending(), 1u);
  EXPECT_TRUE(Logged("w1", "execution.started").empty());

  // The same response from an approver's key is granted and runs: the
  // refusal above was the role's, not the fixture's.
  const JwtSigner alice = Key("approver_key", "alice", {"approver"});
  StageResult ok = Answer(SignedResponse(alice, "alice", "w1", hash));
  const Message* forwarded = ToExecute(ok);
  ASSERT_NE(forwarded, nullptr);
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/notes.txt")) << "nothing ran before the grant";
  Execute(*forwarded);
  ASSERT_EQ(Logged("w1", "execution.completed").size(), 1u);
  EXPECT_TRUE(Logged("w1", "execution.completed")[0].data["result"]["success"]);
  EXPECT_TRUE(std::filesystem::exists(Workspace() + "/notes.txt"));
}

// A kid is public (every credential listing shows it): naming a registered
// approver's kid proves nothing without that key's signature.
TEST_F(GuardTest, AResponseNamingARegisteredApproversKidWithABadSignatureIsRefused) {
  const std::string hash = Held("w2", "notes.txt");
  const JwtSigner alice = Key("approver_key", "alice", {"approver"});
  // alice's own token, one signature byte flipped.
  Message flipped = SignedResponse(alice, "alice", "w2", hash);
  flipped.headers[kHeaderAuth] = WithFlippedSignatureByte(flipped.headers[kHeaderAuth]);
  // mallory's key (registered nowhere) signing under alice's kid.
  std::string pem, pub;
  ASSERT_TRUE(GenerateEd25519(&pem, &pub).ok());
  JwtSigner mallory;
  ASSERT_TRUE(JwtSigner::FromPem(pem, &mallory, KeyIdOfPublicKey(alice.public_b64url())).ok());
  Message borrowed = SignedResponse(mallory, "alice", "w2", hash);
  for (const Message* m : {&flipped, &borrowed}) {
    StageResult r = Answer(*m);
    ExpectRefused(r, "signature");
    EXPECT_FALSE(r.events[0].data.contains("approver")) << "no one was proven";
  }
  RequestState st = State("w2");
  EXPECT_TRUE(st.approval_pending());
  EXPECT_TRUE(st.grants.empty());
  EXPECT_TRUE(Logged("w2", "execution.started").empty());
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/notes.txt"));
  // alice's genuine token is granted.
  EXPECT_NE(ToExecute(Answer(SignedResponse(alice, "alice", "w2", hash))), nullptr);
}

// The same check guards an agent's request (ingest calls AuthenticateRequest).
TEST_F(GuardTest, ARequestNamingARegisteredAgentsKidWithABadSignatureIsRefused) {
  const JwtSigner a1 = Key("agent_key", "a1", {"agent"});
  Message m;
  m.topic = topics_.requests();
  m.key = "a1";
  m.value =
      R"({"request_id":"q1","org_id":"org-1","agent_id":"a1","session_id":"s1","tool":"echo","args":{}})";
  const std::string genuine = SignRequest(a1, "org-1", "a1", "q1", m.value, kAt / 1'000'000);
  SignedBy by;
  m.headers[kHeaderAuth] = genuine;
  ASSERT_TRUE(AuthenticateRequest(m, registry_, kAt, kDefaultMaxSkewUs, &by)) << by.message;
  m.headers[kHeaderAuth] = WithFlippedSignatureByte(genuine);
  EXPECT_FALSE(AuthenticateRequest(m, registry_, kAt, kDefaultMaxSkewUs, &by));
  EXPECT_EQ(by.code, "E_UNAUTHENTICATED");
  EXPECT_EQ(by.check, "signature");
  EXPECT_FALSE(by.signature_ok);
}

// docs/trust.md, "What executes is what was decided": the log's request
// names other.txt, its decision was made for allowed.txt (two stages that
// normalise differently, a decide of another version). ReadFlow finds the
// flow equal to the log; only the subject check stands between the
// decision and the file.
TEST_F(GuardTest, AWriteFileDecidedForOnePathDoesNotOpenAnother) {
  const Json args{{"path", "other.txt"}, {"content", "x"}};
  Flow f = Decide("p1", "allow", args, "allowed.txt");
  ASSERT_EQ(f.decision["subject"], FileSubject("write_file", {{"path", "allowed.txt"}}));
  StageResult r = Execute(MessageFor(topics_.execute(), f.request, f.ToJson()));
  ASSERT_EQ(r.outputs.size(), 1u);
  Json result = Json::parse(r.outputs[0].message.value);
  EXPECT_EQ(result["status"], "failed");
  EXPECT_EQ(result["result"]["error"]["code"], "E_DECISION_MISMATCH") << result.dump();
  EXPECT_TRUE(Logged("p1", "execution.started").empty()) << "refused before anything ran";
  ASSERT_EQ(Logged("p1", "execution.completed").size(), 1u);
  EXPECT_EQ(Logged("p1", "execution.completed")[0].data["result"]["error"]["code"], "E_DECISION_MISMATCH");
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/other.txt"));
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/allowed.txt"));

  // Decided for the path it names, the same call writes it.
  Flow same = Decide("p2", "allow", args, "other.txt");
  StageResult ok = Execute(MessageFor(topics_.execute(), same.request, same.ToJson()));
  ASSERT_EQ(ok.outputs.size(), 1u);
  EXPECT_EQ(Json::parse(ok.outputs[0].message.value)["status"], "completed");
  EXPECT_TRUE(std::filesystem::exists(Workspace() + "/other.txt"));
}

// And after approval: approvers granted allowed.txt, the request names
// other.txt; the grant does not widen what runs.
TEST_F(GuardTest, AGrantedWriteFileDecidedForOnePathDoesNotOpenAnother) {
  const Json args{{"path", "other.txt"}, {"content", "x"}};
  Flow f = Decide("p3", "ask", args, "allowed.txt");
  Append(approve_->Process(MessageFor(topics_.approve(), f.request, f.ToJson()), Ctx(), log_));
  ASSERT_TRUE(State("p3").approval_pending());
  const JwtSigner alice = Key("approver_key", "alice", {"approver"});
  StageResult granted = Answer(SignedResponse(alice, "alice", "p3", f.args_hash));
  const Message* forwarded = ToExecute(granted);
  ASSERT_NE(forwarded, nullptr);
  StageResult r = Execute(*forwarded);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(Json::parse(r.outputs[0].message.value)["result"]["error"]["code"], "E_DECISION_MISMATCH");
  EXPECT_TRUE(Logged("p3", "execution.started").empty());
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/other.txt"));
}

}  // namespace
}  // namespace tollgate
