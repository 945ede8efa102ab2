// Identity and authority through the real pipeline (docs/trust.md): the
// attacks an agent that can publish to Kafka tried, each refused and logged
// with nothing run. Agents are real librdkafka producers; keys are real
// Ed25519 keys registered in the log; approvers use real HTTP tokens or
// their own signing keys.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "agent_keys.h"
#include "api/tokens.h"
#include "audit/audit_query.h"
#include "audit/log_sink.h"
#include "core/messages.h"
#include "core/sha256.h"
#include "core/unproven.h"
#include "core/withdraw.h"
#include "deploy/identity.h"
#include "test_util.h"
#include "tests/child_process.h"
#include "tests/results_reader.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr const char* kPolicy = R"(version: 1
mode: ask
allow: [builtin:echo]
approvals:
  default: {quorum: 2, timeout_s: 900}
)";

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PipelineOptions o;
    o.data_dir = dir_.sub("data");
    o.durability = Durability::kBuffered;
    o.http_listen = "127.0.0.1:0";
    o.policy_path = dir_.sub("policy.yaml");
    std::ofstream(o.policy_path) << kPolicy;
    o.tokens_file = dir_.sub("tokens.json");
    const std::vector<std::pair<std::string, Principal>> who = {
        {"alice", {"alice", "org-1", {"approver"}}}, {"bob", {"bob", "org-1", {"approver"}}},
        {"zed", {"zed", "org-2", {"approver"}}},     {"admin1", {"root1", "org-1", {"admin", "auditor"}}},
        {"agent1", {"a1", "org-1", {"agent"}}},      {"root", {"root", "*", {"admin"}}}};
    for (const auto& [name, p] : who) ASSERT_TRUE(AddToken(o.tokens_file, p, &tokens_[name]).ok());
    ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
    signers_ = std::make_unique<testing::TestSigners>(*p_);
    bus_.brokers = p_->bootstrap();
    ASSERT_TRUE(Producer::Open(bus_, "", &producer_).ok());
    ASSERT_TRUE(testing::ResultsReader::Open(bus_, p_->gate().public_b64url(), "", &results_).ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", p_->api()->port());
    http_->set_read_timeout(20, 0);
  }
  void TearDown() override {
    testing::ExpectEveryEventConforms(p_->log().store());
    http_.reset();
    results_.reset();
    producer_.reset();
    p_.reset();
  }

  Json Request(const std::string& org, const std::string& agent, const std::string& rid,
               const std::string& tool, Json args) {
    return {{"request_id", rid},        {"org_id", org}, {"agent_id", agent},
            {"session_id", "s-" + org}, {"tool", tool},  {"args", std::move(args)}};
  }
  void Send(Message m) {
    ASSERT_TRUE(producer_->Send(m).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  Message RequestMessage(const Json& req) { return MessageFor(bus_.topics.requests(), req, req); }
  void SendSigned(const Json& req) {
    Message m = RequestMessage(req);
    signers_->SignRequest(&m);
    Send(m);
  }
  // The first result for (org, rid), as the agent reads it.
  Json WaitResult(const std::string& org, const std::string& rid) {
    const std::string key = org + "/" + rid;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (results_by_[key].empty() && std::chrono::steady_clock::now() < deadline) {
      std::vector<Message> batch;
      results_->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& m : batch) {
        Json r = Json::parse(m.value);
        results_by_[r.value("org_id", "") + "/" + r.value("request_id", "")].push_back(r);
      }
    }
    return results_by_[key].empty() ? Json() : results_by_[key].front();
  }
  std::vector<Event> EventsOf(const std::string& org, const std::string& rid) {
    std::vector<Event> out;
    StoreLogView view(p_->log().store());
    EXPECT_TRUE(view.EventsOfRequest(org, rid, &out).ok());
    return out;
  }
  size_t Count(const std::string& org, const std::string& rid, const std::string& type) {
    size_t n = 0;
    for (const Event& e : EventsOf(org, rid)) n += e.type == type;
    return n;
  }
  // Events of `type` filed under org "unknown" (refused, unauthenticated).
  std::vector<Event> Unknown(const std::string& type) {
    AuditQuery q;
    q.org_id = "unknown";
    q.types = {type};
    q.limit = 1000;
    AuditPage page;
    EXPECT_TRUE(GetAuditLog(p_->log().store(), QueryScope::Operator(), q, &page).ok());
    return page.events;
  }
  template <typename F>
  bool WaitFor(F pred) {
    return testing::WaitUntil(pred, std::chrono::seconds(20));
  }
  // A write_file that asks (policy: quorum 2); returns its args hash.
  std::string PendingWrite(const std::string& org, const std::string& agent, const std::string& rid,
                           const std::string& path) {
    SendSigned(Request(org, agent, rid, "write_file", {{"path", path}, {"content", "x"}}));
    EXPECT_TRUE(WaitFor([&] { return Count(org, rid, "approval.requested") == 1; })) << rid << " never asked";
    return ArgsHash(Json{{"path", path}, {"content", "x"}});
  }
  httplib::Headers Bearer(const std::string& name) { return {{"Authorization", "Bearer " + tokens_[name]}}; }
  std::string Workspace(const std::string& org, const std::string& agent) {
    return dir_.sub("data") + "/workspaces/" + org + "/" + agent;
  }

  TempDir dir_;
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<testing::TestSigners> signers_;
  BusConfig bus_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<testing::ResultsReader> results_;
  std::unique_ptr<httplib::Client> http_;
  std::map<std::string, std::string> tokens_;
  std::map<std::string, std::vector<Json>> results_by_;
};

TEST_F(TrustTest, EveryRequestThatIsNotProvenIsRejectedWithItsCodeAndLogged) {
  const JwtSigner& a1 = signers_->Agent("org-1", "a1");
  const int64_t now_s = NowMicros() / 1'000'000;
  std::string pem, pub;
  ASSERT_TRUE(GenerateEd25519(&pem, &pub).ok());
  JwtSigner stranger;
  ASSERT_TRUE(JwtSigner::FromPem(pem, &stranger, KeyIdOfPublicKey(pub)).ok());
  struct Case {
    std::string rid, code, check;
    bool under_signer;        // filed under the proven signer, not org "unknown"
    std::string unproven_id;  // the id of its bytes (core/unproven.h)
  };
  std::vector<Case> cases;
  auto send = [&](const std::string& rid, const Json& body, auto sign, const char* code, const char* check,
                  bool under_signer) {
    Message m = RequestMessage(body);
    sign(&m);
    Send(m);
    cases.push_back({rid, code, check, under_signer, UnprovenRequestId(m)});
  };
  const Json args{{"text", "hi"}};
  send(
      "unsigned", Request("org-1", "a1", "unsigned", "echo", args), [](Message*) {}, "E_UNAUTHENTICATED",
      "header", false);
  send(
      "garbage", Request("org-1", "a1", "garbage", "echo", args),
      [](Message* m) { m->headers[kHeaderAuth] = "not.a.jwt"; }, "E_UNAUTHENTICATED", "token", false);
  send(
      "wrong-key", Request("org-1", "a1", "wrong-key", "echo", args),
      [&](Message* m) {
        m->headers[kHeaderAuth] = SignRequest(stranger, "org-1", "a1", "wrong-key", m->value, now_s);
      },
      "E_UNAUTHENTICATED", "revoked", false);
  send(
      "tampered", Request("org-1", "a1", "tampered", "echo", args),
      [&](Message* m) {
        m->headers[kHeaderAuth] = SignRequest(a1, "org-1", "a1", "tampered", m->value, now_s);
        m->value.insert(m->value.size() - 1, ",\"action\":\"x\"");
      },
      "E_UNAUTHENTICATED", "value_sha256", false);
  // Signed by org-1's a1, the body speaks for org-2's victim.
  send(
      "other-org", Request("org-2", "victim", "other-org", "echo", args),
      [&](Message* m) {
        m->headers[kHeaderAuth] = SignRequest(a1, "org-1", "a1", "other-org", m->value, now_s);
      },
      "E_UNAUTHENTICATED", "claims", true);
  send(
      "expired", Request("org-1", "a1", "expired", "echo", args),
      [&](Message* m) {
        m->headers[kHeaderAuth] = SignRequest(a1, "org-1", "a1", "expired", m->value, now_s - 3600);
      },
      "E_SIGNATURE_EXPIRED", "iat", true);
  // A revoked agent: every later request is refused.
  const JwtSigner& gone = signers_->Agent("org-1", "gone");
  Credential c;
  ASSERT_TRUE(p_->credentials().Find(KeyIdOfPublicKey(gone.public_b64url()), &c));
  ASSERT_TRUE(p_->AppendCredentialEvent(CredentialRevokedEvent(c, "test", "left", NowMicros())).ok());
  send(
      "revoked", Request("org-1", "gone", "revoked", "echo", args),
      [&](Message* m) {
        m->headers[kHeaderAuth] = SignRequest(gone, "org-1", "gone", "revoked", m->value, now_s);
      },
      "E_UNAUTHENTICATED", "revoked", false);

  for (const Case& k : cases) {
    // A proven signer gets its own request_id back; what nobody proved is
    // answered under org "unknown" and the id of its bytes, never the ids
    // it names (docs/trust.md).
    const std::string org = k.under_signer ? "org-1" : "unknown";
    const std::string rid = k.under_signer ? k.rid : k.unproven_id;
    Json r = WaitResult(org, rid);
    ASSERT_FALSE(r.is_null()) << k.rid << ": no result";
    EXPECT_EQ(r["status"], "rejected") << k.rid;
    EXPECT_EQ(r["result"]["error"]["code"], k.code) << k.rid;
    EXPECT_EQ(r["request_id"], rid);
    ASSERT_TRUE(WaitFor([&] { return Count(org, rid, "request.rejected") == 1; }))
        << k.rid << " not logged under " << org;
    if (!k.under_signer)
      EXPECT_TRUE(results_by_["org-1/" + k.rid].empty()) << k.rid << " answered as org-1's";
    const Event e = EventsOf(org, rid).front();
    EXPECT_EQ(e.data["check"], k.check) << k.rid << " " << e.type << e.data.dump();
    for (const char* o : {"org-1", "org-2"}) {
      EXPECT_EQ(Count(o, k.rid, "request.received"), 0u) << k.rid << " was accepted in " << o;
      EXPECT_EQ(Count(o, k.rid, "decision.made"), 0u) << k.rid << " was decided in " << o;
    }
  }
  // And a properly signed one goes through.
  SendSigned(Request("org-1", "a1", "fine", "echo", args));
  EXPECT_EQ(WaitResult("org-1", "fine")["status"], "completed");
}

TEST_F(TrustTest, AnAgentCannotApproveItsOwnCallOnTheResponsesTopic) {
  const std::string h = PendingWrite("org-1", "a1", "w1", "notes.txt");
  const Json resp{{"request_id", "w1"}, {"decision", "approve"}, {"approver", "mallory"},
                  {"scope", "always"},  {"args_hash", h},        {"org_id", "org-1"}};
  Message unsigned_resp =
      MessageFor(bus_.topics.approval_responses(), {{"request_id", "w1"}, {"agent_id", "a1"}}, resp);
  Send(unsigned_resp);
  // Signed with the agent's own key: an agent key is no approver key.
  Message agent_signed = unsigned_resp;
  agent_signed.headers[kHeaderAuth] = SignResponse(signers_->Agent("org-1", "a1"), "mallory", "org-1", "w1",
                                                   agent_signed.value, NowMicros() / 1'000'000);
  Send(agent_signed);
  ASSERT_TRUE(WaitFor([&] { return Unknown("approval.refused").size() == 2; }));
  for (const Event& e : Unknown("approval.refused")) {
    EXPECT_EQ(e.data["code"], "E_UNAUTHENTICATED");
    EXPECT_FALSE(e.data.contains("approver")) << "no one was proven";
    EXPECT_EQ(e.data["claimed_approver"], "mallory");
  }
  EXPECT_EQ(Count("org-1", "w1", "approval.granted"), 0u);
  EXPECT_EQ(Count("org-1", "w1", "execution.started"), 0u);
  EXPECT_EQ(Count("org-1", "w1", "policy.updated"), 0u) << "no allow-always rule";
  EXPECT_FALSE(std::filesystem::exists(Workspace("org-1", "a1") + "/notes.txt"));
}

// The MCP gateway over HTTP (docs/trust.md): the service key signs an
// agent's calls on its behalf, and the agent's cancellation withdraws one
// that waits for a human.
TEST_F(TrustTest, TheServiceSignsForAnAgentAndItsCancellationWithdrawsThePendingCall) {
  std::string pem;
  JwtSigner service;
  ASSERT_TRUE(ReadPrivateKeyFile(ServiceKeyPath(dir_.sub("data")), &pem).ok());
  ASSERT_TRUE(SignerForKey(pem, &service).ok());
  const std::string service_kid = KeyIdOfPublicKey(service.public_b64url());
  auto on_behalf = [&](const Json& body, const std::string& org, const std::string& agent) {
    Message m = RequestMessage(body);
    m.headers[kHeaderAuth] = SignRequestOnBehalf(service, org, agent, body.value("request_id", ""), m.value,
                                                 NowMicros() / 1'000'000);
    Send(m);
  };

  on_behalf(Request("org-1", "a1", "via-1", "echo", {{"text", "hi"}}), "org-1", "a1");
  EXPECT_EQ(WaitResult("org-1", "via-1")["status"], "completed");
  const Event received = EventsOf("org-1", "via-1").front();
  ASSERT_EQ(received.type, "request.received");
  EXPECT_EQ(received.agent_id, "a1");
  EXPECT_EQ(received.data["signed_by"], service_kid);
  EXPECT_EQ(received.data["via"], "tollgate-api");

  // Vouching for a1, the body speaks for a2.
  on_behalf(Request("org-1", "a2", "via-2", "echo", {{"text", "hi"}}), "org-1", "a1");
  EXPECT_EQ(WaitResult("org-1", "via-2")["result"]["error"]["code"], "E_UNAUTHENTICATED");
  EXPECT_EQ(Count("org-1", "via-2", "request.received"), 0u);

  // A call that waits for a human, cancelled: the service withdraws it.
  on_behalf(Request("org-1", "a1", "via-3", "write_file", {{"path", "w.txt"}, {"content", "x"}}), "org-1",
            "a1");
  ASSERT_TRUE(WaitFor([&] { return Count("org-1", "via-3", "approval.requested") == 1; }));
  Send(WithdrawMessageOnBehalf(bus_.topics, service, "org-1", "a1", "via-3", "cancelled by the client",
                               NowMicros() / 1'000'000));
  Json r = WaitResult("org-1", "via-3");
  EXPECT_EQ(r["status"], "denied");
  EXPECT_EQ(r["result"]["error"]["code"], "E_WITHDRAWN");
  ASSERT_EQ(Count("org-1", "via-3", "approval.denied"), 1u);
  EXPECT_EQ(Count("org-1", "via-3", "execution.started"), 0u);
  EXPECT_FALSE(std::filesystem::exists(Workspace("org-1", "a1") + "/w.txt"));
}

TEST_F(TrustTest, ABaitAndSwitchOnTheApproveTopicIsRefusedAndWhatRunsIsWhatWasAsked) {
  const std::string h = PendingWrite("org-1", "a1", "w2", "notes.txt");
  std::vector<Event> before = EventsOf("org-1", "w2");
  Json flow_json;
  for (const Event& e : before) {
    if (e.type == "request.received") {
      flow_json = {{"request", e.data["request"]}, {"received_at", e.data["received_at"]}, {"args_hash", h}};
    }
    if (e.type == "decision.made") {
      flow_json["decision"] = WithoutProvenance(e.data);  // as flows carry it
    }
  }
  // The same request_id, other args: E_FLOW_MISMATCH.
  Json other_args = flow_json;
  other_args["request"]["args"]["path"] = "switched.txt";
  Send(MessageFor(bus_.topics.approve(), other_args["request"], other_args));
  // Another org's agent under the same request_id: not in the log there.
  Json other_org = other_args;
  other_org["request"]["org_id"] = "org-2";
  other_org["request"]["agent_id"] = "victim";
  Send(MessageFor(bus_.topics.approve(), other_org["request"], other_org));
  ASSERT_TRUE(WaitFor([&] { return Unknown("request.rejected").size() == 2; }));
  std::set<std::string> codes;
  for (const Event& e : Unknown("request.rejected")) codes.insert(e.data["error"]["code"]);
  EXPECT_EQ(codes, (std::set<std::string>{"E_FLOW_MISMATCH", "E_NOT_IN_LOG"}));
  EXPECT_EQ(EventsOf("org-1", "w2").size(), before.size()) << "the victim's history is untouched";

  // The approvers see and grant notes.txt; notes.txt is what is written.
  for (const char* who : {"alice", "bob"}) {
    auto res = http_->Post("/v1/approvals/w2", Bearer(who), R"({"decision":"approve"})", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
  }
  EXPECT_EQ(WaitResult("org-1", "w2")["status"], "completed");
  EXPECT_TRUE(std::filesystem::exists(Workspace("org-1", "a1") + "/notes.txt"));
  EXPECT_FALSE(std::filesystem::exists(Workspace("org-1", "a1") + "/switched.txt"));
  EXPECT_FALSE(std::filesystem::exists(Workspace("org-2", "victim")));
}

TEST_F(TrustTest, ForgedMessagesOnDecideAndExecuteAreRefusedAndNothingRuns) {
  // decide: a request ingest never received, with a forged received_at.
  Json forged{{"request", Request("org-1", "a1", "forged-d", "echo", {{"text", "x"}})},
              {"received_at", "2020-01-01T00:00:00.000000Z"},
              {"args_hash", ArgsHash(Json{{"text", "x"}})}};
  Send(MessageFor(bus_.topics.decide(), forged["request"], forged));
  // execute: a pending ask, its decision copied from the log.
  const std::string h = PendingWrite("org-1", "a1", "w3", "notes.txt");
  Json flow;
  for (const Event& e : EventsOf("org-1", "w3")) {
    if (e.type == "request.received")
      flow = {{"request", e.data["request"]}, {"received_at", e.data["received_at"]}, {"args_hash", h}};
    if (e.type == "decision.made") {
      flow["decision"] = WithoutProvenance(e.data);  // as flows carry it
    }
  }
  Send(MessageFor(bus_.topics.execute(), flow["request"], flow));
  // execute: the ask rewritten as an allow.
  Json allowed = flow;
  allowed["decision"]["verdict"] = "allow";
  Send(MessageFor(bus_.topics.execute(), allowed["request"], allowed));
  ASSERT_TRUE(WaitFor([&] { return Unknown("request.rejected").size() == 3; }));
  std::multiset<std::string> codes;
  for (const Event& e : Unknown("request.rejected")) codes.insert(e.data["error"]["code"]);
  EXPECT_EQ(codes, (std::multiset<std::string>{"E_FLOW_MISMATCH", "E_NOT_IN_LOG", "E_NOT_IN_LOG"}));
  EXPECT_TRUE(EventsOf("org-1", "forged-d").empty()) << "never decided";
  EXPECT_EQ(Count("org-1", "w3", "execution.started"), 0u);
  EXPECT_FALSE(std::filesystem::exists(Workspace("org-1", "a1") + "/notes.txt"));
}

TEST_F(TrustTest, AQuorumCountsDistinctAuthenticatedIdentitiesOnEveryPath) {
  const std::string h = PendingWrite("org-1", "a1", "w4", "q.txt");
  auto approve = [&](const char* who) {
    return http_->Post("/v1/approvals/w4", Bearer(who), R"({"decision":"approve"})", "application/json");
  };
  auto first = approve("alice");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200) << first->body;
  auto again = approve("alice");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 409) << again->body;
  EXPECT_EQ(Json::parse(again->body)["error"]["code"], "E_APPROVAL_DUPLICATE");
  // alice again, through her own signing key on the topic: still alice.
  const Json resp{{"request_id", "w4"}, {"decision", "approve"}, {"scope", "once"}, {"args_hash", h}};
  Message m = MessageFor(bus_.topics.approval_responses(), {{"request_id", "w4"}, {"agent_id", "a1"}}, resp);
  signers_->SignResponse(&m, "org-1", "alice");
  Send(m);
  // The response names an approver it is not signed by.
  Json lying = resp;
  lying["approver"] = "bob";
  Message m2 =
      MessageFor(bus_.topics.approval_responses(), {{"request_id", "w4"}, {"agent_id", "a1"}}, lying);
  signers_->SignResponse(&m2, "org-1", "alice");
  Send(m2);
  ASSERT_TRUE(WaitFor([&] { return Count("org-1", "w4", "approval.refused") == 3; }));
  std::multiset<std::string> codes;
  for (const Event& e : EventsOf("org-1", "w4")) {
    if (e.type == "approval.refused") codes.insert(e.data["code"]);
  }
  EXPECT_EQ(codes, (std::multiset<std::string>{"E_APPROVAL_DUPLICATE", "E_APPROVAL_DUPLICATE",
                                               "E_UNAUTHENTICATED"}));
  EXPECT_EQ(Count("org-1", "w4", "execution.started"), 0u) << "one identity is not a quorum of two";
  // zed approves for org-2 only.
  auto cross =
      http_->Post("/v1/approvals/w4", Bearer("zed"), R"({"decision":"approve"})", "application/json");
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 404);
  // bob, a second identity, completes it.
  auto second = approve("bob");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200) << second->body;
  EXPECT_EQ(WaitResult("org-1", "w4")["status"], "completed");
}

TEST_F(TrustTest, AnOrgsAdminIsNotAnotherOrgsAdmin) {
  PendingWrite("org-2", "victim", "v1", "mine.txt");
  auto audit = http_->Get("/v1/audit?org=org-2", Bearer("admin1"));
  ASSERT_TRUE(audit);
  EXPECT_EQ(audit->status, 403);
  auto own = http_->Get("/v1/audit", Bearer("admin1"));
  ASSERT_TRUE(own);
  ASSERT_EQ(own->status, 200);
  const Json own_page = Json::parse(own->body);  // named: a range-for over a temporary's member dangles
  for (const Json& e : own_page["events"]) EXPECT_EQ(e["org_id"], "org-1") << e.dump();
  auto deny = http_->Post("/v1/approvals/v1?org=org-2", Bearer("admin1"), R"({"decision":"deny"})",
                          "application/json");
  ASSERT_TRUE(deny);
  EXPECT_EQ(deny->status, 404) << deny->body;
  auto add = http_->Post("/v1/credentials", Bearer("admin1"),
                         R"({"kind":"token","identity":"eve","org_id":"org-2","roles":["admin"]})",
                         "application/json");
  ASSERT_TRUE(add);
  EXPECT_EQ(add->status, 403);
  EXPECT_EQ(Count("org-2", "v1", "approval.denied"), 0u);
  // Nobody, not even a deployment admin, may act in the org refusals are
  // filed under, or register an agent of every org.
  std::string pem, pub;
  ASSERT_TRUE(GenerateEd25519(&pem, &pub).ok());
  for (const char* org : {"unknown", "*"}) {
    auto reserved = http_->Post(
        "/v1/credentials", Bearer("root"),
        Json{{"kind", "agent_key"}, {"identity", "x"}, {"org_id", org}, {"public_key", pub}}.dump(),
        "application/json");
    ASSERT_TRUE(reserved);
    EXPECT_EQ(reserved->status, 400) << org << ": " << reserved->body;
  }
  // Its own org's token: added, usable at once, revoked at once.
  auto mine = http_->Post("/v1/credentials", Bearer("admin1"),
                          R"({"kind":"token","identity":"carol","org_id":"org-1","roles":["auditor"]})",
                          "application/json");
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->status, 201) << mine->body;
  const Json made = Json::parse(mine->body);
  httplib::Headers carol{{"Authorization", "Bearer " + made["token"].get<std::string>()}};
  EXPECT_EQ(http_->Get("/v1/audit", carol)->status, 200);
  EXPECT_EQ(
      http_->Delete("/v1/credentials/" + made["credential"]["key_id"].get<std::string>(), Bearer("admin1"))
          ->status,
      200);
  EXPECT_EQ(http_->Get("/v1/audit", carol)->status, 401);
  std::string log_text;
  for (const Event& e : EventsOf("org-1", "cred:" + made["credential"]["key_id"].get<std::string>())) {
    log_text += e.type + e.data.dump();
  }
  EXPECT_NE(log_text.find("credential.added"), std::string::npos) << log_text;
  EXPECT_NE(log_text.find("credential.revoked"), std::string::npos) << log_text;
  EXPECT_EQ(log_text.find(made["token"].get<std::string>()), std::string::npos)
      << "the token never reaches the log";
}

TEST_F(TrustTest, AnotherAgentOfTheOrgCannotEndARequestByReusingItsId) {
  PendingWrite("org-1", "a1", "w5", "kept.txt");
  // a2, signed and proven, sends a bad body and a conflicting one under w5.
  Json bad = Request("org-1", "a2", "w5", "echo", {{"text", "x"}});
  bad["args"] = "not an object";
  SendSigned(bad);
  SendSigned(Request("org-1", "a2", "w5", "echo", {{"text", "other"}}));
  ASSERT_TRUE(WaitFor([&] { return Count("org-1", "w5", "request.rejected") == 2; }));
  for (const char* who : {"alice", "bob"}) {
    auto res = http_->Post("/v1/approvals/w5", Bearer(who), R"({"decision":"approve"})", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << who << ": " << res->body;
  }
  ASSERT_TRUE(WaitFor([&] { return Count("org-1", "w5", "execution.completed") == 1; }));
  EXPECT_TRUE(std::filesystem::exists(Workspace("org-1", "a1") + "/kept.txt"));
}

TEST_F(TrustTest, RequestIdsArePerOrgSoAnotherOrgCannotSquatOne) {
  SendSigned(Request("org-2", "squatter", "shared-1", "echo", {{"text", "first"}}));
  EXPECT_EQ(WaitResult("org-2", "shared-1")["status"], "completed");
  SendSigned(Request("org-1", "a1", "shared-1", "echo", {{"text", "mine"}}));
  Json r = WaitResult("org-1", "shared-1");
  EXPECT_EQ(r["status"], "completed") << r.dump();
  EXPECT_EQ(r["result"]["data"]["text"], "mine");
  EXPECT_EQ(Count("org-1", "shared-1", "execution.completed"), 1u);
  EXPECT_EQ(Count("org-2", "shared-1", "execution.completed"), 1u);
}

TEST_F(TrustTest, AnOverSizeSignedRequestIsRejectedUnderItsSendersOwnRequestId) {
  Json big = Request("org-1", "a1", "big-1", "echo", {{"text", std::string((1 << 20) + 100, 'x')}});
  BusConfig large = bus_;
  large.extra["message.max.bytes"] = "8000000";
  std::unique_ptr<Producer> producer;
  ASSERT_TRUE(Producer::Open(large, "", &producer).ok());
  Message m = RequestMessage(big);
  signers_->SignRequest(&m);
  ASSERT_TRUE(producer->Send(m).ok());
  ASSERT_TRUE(producer->Flush(std::chrono::seconds(10)).ok());
  Json r = WaitResult("org-1", "big-1");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["result"]["error"]["code"], "E_REQUEST_TOO_LARGE");
  EXPECT_EQ(Count("org-1", "big-1", "request.rejected"), 1u)
      << "filed under the proven sender and its own id";
}

TEST_F(TrustTest, AnAgentsTokenReadsOnlyItsOwnEntries) {
  SendSigned(Request("org-1", "a1", "mine-1", "echo", {{"text", "a"}}));
  SendSigned(Request("org-1", "a2", "theirs-1", "echo", {{"text", "b"}}));
  ASSERT_EQ(WaitResult("org-1", "mine-1")["status"], "completed");
  ASSERT_EQ(WaitResult("org-1", "theirs-1")["status"], "completed");
  auto own = http_->Get("/v1/audit", Bearer("agent1"));
  ASSERT_TRUE(own);
  ASSERT_EQ(own->status, 200) << own->body;
  const Json events = Json::parse(own->body)["events"];
  EXPECT_FALSE(events.empty());
  for (const Json& e : events) EXPECT_EQ(e["agent_id"], "a1") << e.dump();
  EXPECT_EQ(http_->Get("/v1/audit?agent=a2", Bearer("agent1"))->status, 403);
  EXPECT_EQ(http_->Get("/v1/audit?org=org-2", Bearer("agent1"))->status, 403);
  EXPECT_EQ(http_->Get("/v1/approvals", Bearer("agent1"))->status, 403);
}

using CliRun = testing::CommandResult;
CliRun Tollgate(const std::string& args, const std::string& env, const std::string& stdin_file = "") {
  std::string cmd = env + " " + TOLLGATE_BIN + " " + args + " 2>/dev/null";
  if (!stdin_file.empty()) cmd += " < " + stdin_file;
  return testing::RunCommand(cmd);
}

TEST_F(TrustTest, AnOperatorRegistersSignsAndRevokesAnAgentWithTheCliWhileUpRuns) {
  const std::string data = dir_.sub("data");
  const std::string root = "TOLLGATE_TOKEN=" + tokens_["root"];
  // An org's admin cannot register an agent of another org; no key is left behind.
  CliRun foreign = Tollgate("agents add --data " + data + " --org org-2 --agent sneaky",
                            "TOLLGATE_TOKEN=" + tokens_["admin1"]);
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(data + "/keys/org-2/sneaky.pem"));

  CliRun add = Tollgate("agents add --data " + data + " --org org-1 --agent cli-agent", root);
  ASSERT_EQ(add.exit_code, 0) << add.out;
  const std::string key = data + "/keys/org-1/cli-agent.pem";
  struct stat st {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  CliRun list = Tollgate("agents list --data " + data + " --org org-1", "");
  EXPECT_NE(list.out.find("\"cli-agent\""), std::string::npos) << list.out;
  std::string pem;
  ASSERT_TRUE(ReadPrivateKeyFile(key, &pem).ok());
  const Json added = Json::parse(add.out)["credential"];
  EXPECT_EQ(added.dump().find("PRIVATE"), std::string::npos);
  int64_t added_us = 0;
  ASSERT_TRUE(ParseTime(added.value("added_at", ""), &added_us));
  EXPECT_GT(added_us, NowMicros() - 600'000'000) << "added_at is when it was added";

  // `agents sign` makes the header a kcat user attaches.
  std::string last_unproven_id;  // of the last message sent (core/unproven.h)
  auto send_signed_by_cli = [&](const std::string& rid) {
    Json req = Request("org-1", "cli-agent", rid, "echo", {{"text", rid}});
    Message m = RequestMessage(req);
    m.value += "\n";  // as `echo ... > msg.json` writes it and kcat sends it
    const std::string msg = dir_.sub(rid + ".json");
    std::ofstream(msg) << m.value;
    CliRun sign = Tollgate("agents sign --data " + data, "", msg);
    ASSERT_EQ(sign.exit_code, 0);
    std::string header = sign.out;
    while (!header.empty() && header.back() == '\n') header.pop_back();
    m.headers[kHeaderAuth] = header;
    last_unproven_id = UnprovenRequestId(m);
    Send(m);
  };
  send_signed_by_cli("cli-1");
  EXPECT_EQ(WaitResult("org-1", "cli-1")["status"], "completed");

  CliRun revoke =
      Tollgate("agents revoke --data " + data + " --org org-1 --agent cli-agent --reason left", root);
  ASSERT_EQ(revoke.exit_code, 0) << revoke.out;
  send_signed_by_cli("cli-2");
  // A revoked key proves nobody: answered under org "unknown".
  Json r = WaitResult("unknown", last_unproven_id);
  EXPECT_EQ(r["result"]["error"]["code"], "E_UNAUTHENTICATED");
  ASSERT_TRUE(WaitFor([&] { return Count("unknown", last_unproven_id, "request.rejected") == 1; }));
  EXPECT_EQ(EventsOf("unknown", last_unproven_id).front().data["check"], "revoked");
  EXPECT_EQ(EventsOf("unknown", last_unproven_id).front().data["claimed"]["request_id"], "cli-2");
}

// With no `up` running, the CLI appends to the log itself; `up` folds what
// it finds there at start.
TEST(TrustCliTest, CredentialsAddedWithNoUpRunningAreInForceWhenUpStarts) {
  TempDir dir;
  const std::string data = dir.sub("fresh");
  CliRun add = Tollgate("agents add --data " + data + " --org o9 --agent offline", "");
  ASSERT_EQ(add.exit_code, 0) << add.out;
  CliRun tok = Tollgate("tokens add --data " + data + " --identity aud9 --org o9 --role auditor", "");
  ASSERT_EQ(tok.exit_code, 0) << tok.out;
  std::string token = tok.out;
  while (!token.empty() && token.back() == '\n') token.pop_back();
  ASSERT_EQ(token.size(), 64u);

  PipelineOptions o;
  o.data_dir = data;
  o.durability = Durability::kBuffered;
  o.http_listen = "127.0.0.1:0";
  std::unique_ptr<Pipeline> p;
  ASSERT_TRUE(Pipeline::Start(o, &p).ok());
  std::string pem;
  JwtSigner signer;
  ASSERT_TRUE(ReadPrivateKeyFile(data + "/keys/o9/offline.pem", &pem).ok());
  ASSERT_TRUE(SignerForKey(pem, &signer).ok());
  BusConfig bus;
  bus.brokers = p->bootstrap();
  std::unique_ptr<Producer> producer;
  std::unique_ptr<testing::ResultsReader> results;
  ASSERT_TRUE(Producer::Open(bus, "", &producer).ok());
  ASSERT_TRUE(testing::ResultsReader::Open(bus, p->gate().public_b64url(), "", &results, {"o9"}).ok());
  Json req{{"request_id", "off-1"}, {"org_id", "o9"}, {"agent_id", "offline"},
           {"session_id", "s"},     {"tool", "echo"}, {"args", {{"text", "hi"}}}};
  Message m = MessageFor(bus.topics.requests(), req, req);
  m.headers[kHeaderAuth] = SignRequest(signer, "o9", "offline", "off-1", m.value, NowMicros() / 1'000'000);
  ASSERT_TRUE(producer->Send(m).ok());
  ASSERT_TRUE(producer->Flush(std::chrono::seconds(10)).ok());
  Json result;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (result.is_null() && std::chrono::steady_clock::now() < deadline) {
    std::vector<Message> batch;
    results->Poll(100, std::chrono::milliseconds(100), &batch);
    for (auto& r : batch) {
      if (r.headers[kHeaderRequestId] == "off-1") result = Json::parse(r.value);
    }
  }
  EXPECT_EQ(result.value("status", ""), "completed") << result.dump();
  httplib::Client http("127.0.0.1", p->api()->port());
  auto audit = http.Get("/v1/audit", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(audit);
  EXPECT_EQ(audit->status, 200) << audit->body;
}

}  // namespace
}  // namespace tollgate
