// Fair sharing (issue 28, docs/http_api.md "Limits", docs/mcp.md "Limits",
// docs/approvals.md "Limits"): capacity is per identity, with room kept for
// approvers and operators. The connection budget and the MCP session table
// as plain objects (an injected clock for idleness, real sockets for cuts);
// the approve stage's pending cap as a pure function; the HTTP API on a real
// loopback server with a real log and the embedded broker.
#include "api/fair_share.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "api/http_api.h"
#include "approve/approve_stage.h"
#include "approve_util.h"
#include "audit/event_log.h"
#include "core/credentials.h"
#include "core/messages.h"
#include "core/request_state.h"
#include "mcp/http_endpoint.h"
#include "test_util.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------
// The connection budget.

ConnectionOwner Agent(const std::string& token, const std::string& org = "o1",
                      const std::string& agent = "a1") {
  return {token, org, agent, false};
}
ConnectionOwner Staff(const std::string& token, const std::string& org = "o1") {
  return {token, org, "alice", true};
}

// Two connected sockets: the server's end goes into the budget, the
// client's end sees what the server does to it.
struct Pair {
  int server = -1, client = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    server = fds[0];
    client = fds[1];
  }
  ~Pair() {
    ::close(server);
    ::close(client);
  }
  // Whether the server's end was shut down (the client reads EOF at once).
  bool Cut() const {
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) return false;
    char c;
    return ::recv(client, &c, 1, MSG_DONTWAIT) == 0;
  }
  // Not cut: nothing to read and no EOF (a shutdown is seen at once, so
  // this needs no waiting).
  bool Open() const {
    pollfd p{client, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }
};

TEST(ConnectionBudget, ATokenPastItsShareIsRefusedWith429AndOthersAreStillCharged) {
  FairShareLimits l;
  l.max_connections_per_token = 2;
  ConnectionBudget b(l);
  Refusal why;
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t1"), &why));
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t1"), &why));
  const uint64_t third = b.Enter(-1);
  EXPECT_FALSE(b.Charge(third, Agent("t1"), &why));
  EXPECT_EQ(why.status, 429);
  EXPECT_EQ(why.code, "E_TOO_MANY_CONNECTIONS");
  EXPECT_TRUE(b.Charge(b.Enter(-1), Agent("t2", "o1", "a2"), &why))
      << "another agent's token is not affected";
  EXPECT_EQ(b.usage().agent, 3);
  EXPECT_EQ(b.usage().unauthenticated, 1) << "the refused one stays unauthenticated until it closes";
  EXPECT_EQ(b.usage().refused_identity, 1u);
  b.Leave(third);
  EXPECT_EQ(b.usage().unauthenticated, 0);
}

TEST(ConnectionBudget, AnAgentsTokensShareTheAgentsCapAndAnOrgsAgentsTheOrgs) {
  FairShareLimits l;
  l.max_connections_per_token = 2;
  l.max_connections_per_agent = 3;
  l.max_connections_per_org = 4;
  ConnectionBudget b(l);
  Refusal why;
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t1"), &why));
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t1"), &why));
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t2"), &why));
  EXPECT_FALSE(b.Charge(b.Enter(-1), Agent("t2"), &why)) << "a second token of the same agent";
  EXPECT_EQ(why.code, "E_TOO_MANY_CONNECTIONS");
  EXPECT_NE(why.message.find("agent 'a1'"), std::string::npos) << why.message;
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t3", "o1", "a2"), &why));
  EXPECT_FALSE(b.Charge(b.Enter(-1), Agent("t4", "o1", "a3"), &why)) << "the org's fifth";
  EXPECT_NE(why.message.find("org 'o1'"), std::string::npos) << why.message;
  EXPECT_TRUE(b.Charge(b.Enter(-1), Agent("t5", "o2", "a1"), &why)) << "another org";
  EXPECT_EQ(b.org_connections("o1"), 4);
  EXPECT_EQ(b.agent_connections("o1", "a1"), 3);
}

TEST(ConnectionBudget, AgentsFillingTheirPoolLeaveTheStaffsRoomUntouched) {
  FairShareLimits l;
  l.max_agent_connections = 2;
  l.max_staff_connections = 1;
  ConnectionBudget b(l);
  Refusal why;
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t1", "o1", "a1"), &why));
  ASSERT_TRUE(b.Charge(b.Enter(-1), Agent("t2", "o2", "a2"), &why));
  EXPECT_FALSE(b.Charge(b.Enter(-1), Agent("t3", "o3", "a3"), &why));
  EXPECT_EQ(why.status, 503);
  EXPECT_EQ(why.code, "E_BUSY");
  EXPECT_TRUE(b.Charge(b.Enter(-1), Staff("s1"), &why)) << "an approver still gets in";
  EXPECT_FALSE(b.Charge(b.Enter(-1), Staff("s2"), &why)) << "staff have a cap of their own";
  EXPECT_EQ(b.usage().staff, 1);
  EXPECT_EQ(b.usage().agent, 2);
}

TEST(ConnectionBudget, AFullUnauthenticatedPoolCutsTheOldestStillSendingItsHeadersFirst) {
  FairShareLimits l;
  l.max_unauthenticated = 2;
  ConnectionBudget b(l);
  Pair a, bb, c, d, staff;
  const uint64_t ia = b.Enter(a.server);
  b.HeadersDone(ia);  // a request that arrived, its handler running
  b.Enter(bb.server);
  b.Enter(c.server);  // the pool was full: the idle one goes, not the older a
  EXPECT_TRUE(bb.Cut());
  EXPECT_TRUE(a.Open());
  EXPECT_TRUE(c.Open());
  // Charged connections are never cut.
  const uint64_t is = b.Enter(staff.server);
  EXPECT_TRUE(c.Cut()) << "the idle c made room for the next";
  Refusal why;
  ASSERT_TRUE(b.Charge(is, Staff("s1"), &why));
  b.Enter(d.server);
  EXPECT_TRUE(staff.Open());
  EXPECT_TRUE(a.Open()) << "room was there once the staff connection left the pool";
  Pair e;
  const uint64_t ie = b.Enter(e.server);  // {a (headers done), d (idle)}: d goes
  EXPECT_TRUE(d.Cut());
  b.HeadersDone(ie);  // e's request arrives: none is idle now
  Pair f;
  b.Enter(f.server);
  EXPECT_TRUE(e.Open());
  EXPECT_TRUE(a.Cut()) << "with none idle, the oldest goes";
  EXPECT_EQ(b.usage().unauthenticated, 2);
  EXPECT_EQ(b.usage().evicted, 4u);
  EXPECT_EQ(b.usage().staff, 1);
}

TEST(ConnectionBudget, ACutConnectionCannotBeChargedAndLeavesNothingBehind) {
  FairShareLimits l;
  l.max_unauthenticated = 1;
  ConnectionBudget b(l);
  Pair a, c;
  const uint64_t ia = b.Enter(a.server);
  const uint64_t ic = b.Enter(c.server);
  Refusal why;
  EXPECT_FALSE(b.Charge(ia, Agent("t1"), &why));
  EXPECT_EQ(why.code, "E_BUSY");
  b.Leave(ia);
  b.Leave(ic);
  const auto u = b.usage();
  EXPECT_EQ(u.unauthenticated + u.agent + u.staff, 0);
}

// ---------------------------------------------------------------------------
// The MCP session table (no network: HttpCall in, HttpReply out).

class McpLimits : public ::testing::Test {
 protected:
  void Make(mcp::HttpEndpointLimits l) {
    l.clock = [this] { return now_; };
    ep_ = std::make_unique<mcp::HttpEndpoint>(mcp::Gateway{}, std::move(l));
  }
  mcp::HttpCall Call(const std::string& method, const std::string& body, const std::string& session,
                     const std::string& agent, const std::string& org = "o1") {
    std::map<std::string, std::string> h{{"Accept", "application/json, text/event-stream"}};
    if (!session.empty()) h["Mcp-Session-Id"] = session;
    return {method,
            body,
            [h](const std::string& k) {
              auto it = h.find(k);
              return it == h.end() ? std::string() : it->second;
            },
            org,
            agent,
            [this] { return gone_.load(); }};
  }
  // A new session of (org, agent): its id, or "" with *status.
  std::string Init(const std::string& agent, const std::string& org = "o1", int* status = nullptr,
                   mcp::HttpReply* reply = nullptr) {
    mcp::HttpReply r = ep_->Handle(Call(
        "POST", R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})",
        "", agent, org));
    if (status) *status = r.status;
    if (reply) *reply = r;
    for (const auto& [k, v] : r.headers) {
      if (k == "Mcp-Session-Id") return v;
    }
    return "";
  }
  int Ping(const std::string& session, const std::string& agent, const std::string& org = "o1") {
    return ep_->Handle(Call("POST", R"({"jsonrpc":"2.0","id":2,"method":"ping"})", session, agent, org))
        .status;
  }
  mcp::HttpReply Stream(const std::string& session, const std::string& agent, const std::string& org = "o1") {
    return ep_->Handle(Call("GET", "", session, agent, org));
  }
  static std::string CodeOf(const mcp::HttpReply& r) {
    return Json::parse(r.body)["error"]["data"].value("code", "");
  }

  Clock::time_point now_ = Clock::now();
  std::atomic<bool> gone_{false};
  std::unique_ptr<mcp::HttpEndpoint> ep_;
};

TEST_F(McpLimits, ASessionIdleLongerThanTheLimitEndsAndOneInUseDoesNot) {
  mcp::HttpEndpointLimits l;
  l.session_idle = 30min;
  Make(l);
  const std::string a = Init("a1"), b = Init("a1");
  ASSERT_FALSE(a.empty());
  now_ += 20min;
  EXPECT_EQ(Ping(b, "a1"), 200);
  now_ += 15min;  // a: idle 35 min; b: 15
  EXPECT_EQ(Ping(a, "a1"), 404);
  EXPECT_EQ(Ping(b, "a1"), 200);
  now_ += 30min;
  ep_->ExpireIdle();
  EXPECT_EQ(ep_->sessions(), 0u) << "ended by the sweep, without being named";
}

TEST_F(McpLimits, ASessionWithAnOpenStreamIsNeverEndedForIdleness) {
  mcp::HttpEndpointLimits l;
  l.session_idle = 30min;
  Make(l);
  const std::string s = Init("a1");
  mcp::HttpReply get = Stream(s, "a1");
  ASSERT_EQ(get.status, 200);
  ASSERT_TRUE(get.stream);
  std::atomic<int> writes{0};
  std::thread t([&] { get.stream([&](const std::string&) { return ++writes > 0; }); });
  EXPECT_TRUE(testing::WaitUntil([&] { return writes > 0; })) << "the first keepalive: it runs";
  now_ += 2h;
  ep_->ExpireIdle();
  EXPECT_EQ(ep_->sessions(), 1u);
  EXPECT_EQ(Ping(s, "a1"), 200);
  gone_ = true;  // the client hangs up: the stream ends
  t.join();
  get = {};  // the reply (and its hold on the session) goes with the request
  gone_ = false;
  now_ += 31min;
  EXPECT_EQ(Ping(s, "a1"), 404) << "idle once the stream ended";
}

TEST_F(McpLimits, AnAgentAtItsSessionCapDisplacesItsOwnLeastRecentlyUsedIdleSession) {
  mcp::HttpEndpointLimits l;
  l.max_sessions_per_agent = 3;
  Make(l);
  const std::string other = Init("a2");
  std::vector<std::string> s;
  for (int i = 0; i < 3; ++i) {
    s.push_back(Init("a1"));
    now_ += 1s;
  }
  EXPECT_EQ(Ping(s[0], "a1"), 200);  // s[1] is now the least recently used
  const std::string fourth = Init("a1");
  ASSERT_FALSE(fourth.empty());
  EXPECT_EQ(Ping(s[1], "a1"), 404);
  EXPECT_EQ(Ping(s[0], "a1"), 200);
  EXPECT_EQ(Ping(s[2], "a1"), 200);
  EXPECT_EQ(Ping(other, "a2"), 200) << "another agent's session is untouched";
  EXPECT_EQ(ep_->sessions_of("o1", "a1"), 3u);
}

TEST_F(McpLimits, FiveThousandInitializesOfOneAgentHoldOnlyItsShareOfTheTable) {
  mcp::HttpEndpointLimits l;
  l.max_sessions = 200;
  l.max_sessions_per_agent = 64;
  Make(l);
  const std::string other = Init("a2", "o2");
  int refused = 0;
  for (int i = 0; i < 5000; ++i) refused += Init("a1").empty();
  EXPECT_EQ(refused, 0) << "each new session displaces an idle one of the same agent";
  EXPECT_EQ(ep_->sessions_of("o1", "a1"), 64u);
  EXPECT_EQ(Ping(other, "a2", "o2"), 200);
  EXPECT_FALSE(Init("a3", "o3").empty()) << "the table has room for others";
}

TEST_F(McpLimits, WhenEverySessionOfTheAgentIsBusyANewOneIsRefusedWith429) {
  mcp::HttpEndpointLimits l;
  l.max_sessions_per_agent = 1;
  Make(l);
  const std::string s = Init("a1");
  mcp::HttpReply get = Stream(s, "a1");  // held while the reply lives
  ASSERT_EQ(get.status, 200);
  int status = 0;
  mcp::HttpReply refused;
  EXPECT_EQ(Init("a1", "o1", &status, &refused), "");
  EXPECT_EQ(status, 429);
  EXPECT_EQ(CodeOf(refused), "E_TOO_MANY_SESSIONS");
  get = {};
  EXPECT_FALSE(Init("a1").empty()) << "free again once the stream is gone";
}

TEST_F(McpLimits, AnOrgAtItsCapAndTheTableAtItsCap) {
  mcp::HttpEndpointLimits l;
  l.max_sessions_per_org = 2;
  l.max_sessions = 3;
  Make(l);
  const std::string x = Init("x", "o1");
  std::vector<mcp::HttpReply> busy;
  busy.push_back(Stream(x, "x", "o1"));
  const std::string y = Init("y", "o1");
  busy.push_back(Stream(y, "y", "o1"));
  int status = 0;
  mcp::HttpReply r;
  EXPECT_EQ(Init("z", "o1", &status, &r), "");
  EXPECT_EQ(status, 429);
  EXPECT_NE(Json::parse(r.body)["error"].value("message", "").find("org 'o1'"), std::string::npos) << r.body;
  const std::string w = Init("w", "o2");
  busy.push_back(Stream(w, "w", "o2"));
  EXPECT_EQ(Init("v", "o3", &status, &r), "");
  EXPECT_EQ(status, 503);
  EXPECT_EQ(CodeOf(r), "E_TOO_MANY_SESSIONS");
}

TEST_F(McpLimits, AnAgentsEventStreamsPastItsCapAreRefusedWith429) {
  mcp::HttpEndpointLimits l;
  l.max_streams_per_agent = 2;
  Make(l);
  const std::string s = Init("a1"), other = Init("a2");
  mcp::HttpReply one = Stream(s, "a1"), two = Stream(s, "a1");
  ASSERT_EQ(two.status, 200);
  mcp::HttpReply three = Stream(s, "a1");
  EXPECT_EQ(three.status, 429);
  EXPECT_EQ(CodeOf(three), "E_TOO_MANY_STREAMS");
  EXPECT_EQ(Stream(other, "a2").status, 200) << "another agent's streams are its own";
  EXPECT_EQ(ep_->Stats()["streams"], 2);  // a2's ended with its reply
  one = {};
  EXPECT_EQ(Stream(s, "a1").status, 200);
}

// ---------------------------------------------------------------------------
// The approve stage's cap on pending approvals per (org, agent).

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
  void Append(const std::vector<Event>& events, ApproveStage* listener) {
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
  std::vector<Event> events_;
};

constexpr int64_t kT0 = 1'790'000'000'000'000;

class PendingCap : public ::testing::Test {
 protected:
  PendingCap() { Make(); }
  void Make() {
    ApproveConfig c;
    c.topics = topics_;
    c.max_pending_per_agent = 2;
    stage_ = std::make_unique<ApproveStage>(c);
  }
  // decide's events in the log; the flow processed (not yet appended).
  StageResult Ask(const std::string& rid, const std::string& agent = "agent-1", int n = 0,
                  int timeout_s = 900) {
    testing::AskSpec spec;
    spec.request_id = rid;
    spec.agent = agent;
    spec.timeout_s = timeout_s;
    auto ask = testing::MakeAsk(spec, kT0);
    log_.Append(ask.events, nullptr);
    Message m;
    m.topic = topics_.approve();
    m.key = agent;
    m.value = ask.flow.ToJson().dump();
    return stage_->Process(m, {kT0 + 1'000'000, "inc/approve/0/" + std::to_string(n ? n : next_++)}, log_);
  }
  StageResult AskAndAppend(const std::string& rid, const std::string& agent = "agent-1",
                           int timeout_s = 900) {
    StageResult r = Ask(rid, agent, 0, timeout_s);
    log_.Append(r.events, stage_.get());
    return r;
  }
  static const Json* FinalResult(const StageResult& r) {
    for (const auto& o : r.outputs) {
      if (o.value_json.is_object() && o.value_json.value("status", "") == "denied") return &o.value_json;
    }
    return nullptr;
  }

  Topics topics_;
  VectorLog log_;
  std::unique_ptr<ApproveStage> stage_;
  int next_ = 1;
};

TEST_F(PendingCap, AnAskPastItsAgentsCapEndsDeniedOnTheRecordAndIsNeverPutToApprovers) {
  AskAndAppend("r1");
  AskAndAppend("r2");
  StageResult r = AskAndAppend("r3");
  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = r.events[0];
  EXPECT_EQ(e.type, "approval.denied");
  EXPECT_EQ(e.data["code"], errc::kTooManyPending);
  EXPECT_EQ(e.data["approver"], "tollgate");
  EXPECT_EQ(e.data["pending"], 2);
  EXPECT_EQ(e.data["limit"], 2);
  const Json* result = FinalResult(r);
  ASSERT_NE(result, nullptr);
  EXPECT_EQ((*result)["result"]["error"]["code"], errc::kTooManyPending);
  EXPECT_EQ((*result)["result"]["error"]["recoverable"], true);
  EXPECT_EQ(stage_->pending(), 2u);
  // The log's own account of it (a re-sent request is answered from it).
  std::vector<Event> h;
  ASSERT_TRUE(log_.EventsOfRequest("org-1", "r3", &h).ok());
  RequestState st = Summarize(h);
  EXPECT_TRUE(st.terminal());
  EXPECT_FALSE(st.approval_pending());
  EXPECT_EQ(ResultFromLog(st)["result"]["error"]["code"], errc::kTooManyPending);
  // Another agent of the org has a share of its own.
  StageResult other = AskAndAppend("r4", "agent-2");
  ASSERT_EQ(other.events.size(), 1u);
  EXPECT_EQ(other.events[0].type, "approval.requested");
}

TEST_F(PendingCap, AsksOfOneBatchCountEachOther) {
  // Processed one after another before the batch is appended (the
  // listener has not folded any of them yet).
  StageResult a = Ask("r1"), b = Ask("r2"), c = Ask("r3");
  EXPECT_EQ(a.events[0].type, "approval.requested");
  EXPECT_EQ(b.events[0].type, "approval.requested");
  EXPECT_EQ(c.events[0].type, "approval.denied");
  for (const StageResult* r : {&a, &b, &c}) log_.Append(r->events, stage_.get());
  EXPECT_EQ(stage_->pending(), 2u);
}

TEST_F(PendingCap, ASettledApprovalGivesItsPlaceBack) {
  AskAndAppend("r1", "agent-1", /*timeout_s=*/1);
  AskAndAppend("r2");
  StageResult expired = stage_->Tick({kT0 + 5'000'000, "tick"}, log_);  // r1's deadline passed
  log_.Append(expired.events, stage_.get());
  ASSERT_EQ(stage_->pending(), 1u);
  StageResult r = AskAndAppend("r3");
  EXPECT_EQ(r.events[0].type, "approval.requested");
}

TEST_F(PendingCap, ADenialReadAgainAfterACrashSendsItsResultAgainAndLogsNothingNew) {
  AskAndAppend("r1");
  AskAndAppend("r2");
  StageResult first = Ask("r3", "agent-1", 77);
  log_.Append(first.events, stage_.get());
  const size_t logged = log_.events_.size();
  StageResult again = Ask("r3", "agent-1", 77);  // the same message (same source)
  log_.Append(again.events, stage_.get());
  EXPECT_EQ(log_.events_.size(), logged);
  const Json* result = FinalResult(again);
  ASSERT_NE(result, nullptr);
  EXPECT_EQ((*result)["result"]["error"]["code"], errc::kTooManyPending);
}

TEST_F(PendingCap, AStageStartedFromTheLogCountsWhatTheLogHolds) {
  AskAndAppend("r1");
  AskAndAppend("r2");
  Make();  // a restart: the fold comes from the log
  ASSERT_TRUE(stage_
                  ->Load([this](const std::function<void(const Event&)>& visit) {
                    for (const Event& e : log_.events_) visit(e);
                    return Status::Ok();
                  })
                  .ok());
  StageResult r = AskAndAppend("r3");
  EXPECT_EQ(r.events[0].type, "approval.denied");
}

// ---------------------------------------------------------------------------
// The HTTP API on a real loopback server.

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until the end of the response head (or EOF / `wait`): the head.
std::string ReadHead(int fd, std::chrono::milliseconds wait = 5s) {
  std::string got;
  const auto until = Clock::now() + wait;
  while (got.find("\r\n\r\n") == std::string::npos && Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Everything the server sends until it closes `fd` (or `wait` passes).
std::string ReadAll(int fd, std::chrono::milliseconds wait = 5s) {
  std::string got;
  const auto until = Clock::now() + wait;
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Whether the server closes `fd` within `wait` (reading whatever it sends).
bool ClosedWithin(int fd, std::chrono::milliseconds wait) {
  const auto until = Clock::now() + wait;
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) return true;
  }
  return false;
}

class FairShareApi : public ::testing::Test {
 protected:
  void SetUp() override {
    LogOptions lo;
    lo.durability = Durability::kBuffered;
    ASSERT_TRUE(EventLog::Open(dir_.sub("log"), lo, &log_).ok());
    ASSERT_TRUE(EmbeddedBroker::Start(1, &broker_).ok());
  }
  // The server with `limits`, an MCP endpoint with `mcp_limits`, and a
  // token per principal (in the credential registry, so it can be revoked).
  void Start(FairShareLimits limits, mcp::HttpEndpointLimits mcp_limits = {}) {
    for (const auto& [name, who] :
         std::vector<std::pair<std::string, Principal>>{{"agent", {"a1", "o1", {"agent"}}},
                                                        {"agent2", {"a2", "o2", {"agent"}}},
                                                        {"approver", {"alice", "o1", {"approver"}}},
                                                        {"admin", {"root", "*", {"admin"}}}}) {
      token_[name] = NewToken();
      Credential c;
      ASSERT_TRUE(
          NewCredential(
              {{"kind", "token"}, {"org_id", who.org_id}, {"identity", who.identity}, {"roles", who.roles}},
              "test", token_[name], registry_, &c)
              .ok());
      registry_.Apply(CredentialAddedEvent(c, kT0));
      cred_[name] = c;
    }
    ApiOptions o;
    o.bus.brokers = broker_->bootstrap();
    o.credentials = &registry_;
    o.limits = limits;
    o.mcp = std::make_shared<mcp::HttpEndpoint>(mcp::Gateway{}, mcp_limits);
    ASSERT_TRUE(ApiServer::Start(std::move(o), log_->store(), &api_).ok());
    testing::WaitUntil([&] { return Get("/healthz", "").status == 200; }, 2s);
  }
  struct Answer {
    int status = 0;
    Json body;
  };
  Answer Get(const std::string& path, const std::string& who) {
    httplib::Client http("127.0.0.1", api_->port());
    http.set_read_timeout(10, 0);
    httplib::Headers h;
    if (!who.empty()) h.emplace("Authorization", "Bearer " + token_[who]);
    auto r = http.Get(path.c_str(), h);
    if (!r) return {};
    return {r->status, Json::parse(r->body, nullptr, false)};
  }
  std::string Session(const std::string& who) {
    httplib::Client http("127.0.0.1", api_->port());
    auto r = http.Post(
        "/mcp", {{"Authorization", "Bearer " + token_[who]}},
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})",
        "application/json");
    return r ? r->get_header_value("Mcp-Session-Id") : "";
  }
  // A GET /mcp stream on a raw socket, left open: the socket and its head.
  std::pair<int, std::string> OpenStream(const std::string& who, const std::string& session) {
    int fd = Connect(api_->port());
    const std::string req = "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token_[who] +
                            "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + session + "\r\n\r\n";
    ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    return {fd, ReadHead(fd)};
  }
  // Polls /v1/connections until `done` holds of it (true) or `wait` passes.
  bool Until(const std::function<bool(const Json&)>& done, std::chrono::milliseconds wait = 10s) {
    return testing::WaitUntil(
        [&] {
          Answer a = Get("/v1/connections", "admin");
          return a.status == 200 && done(a.body);
        },
        wait);
  }

  testing::TempDir dir_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<EmbeddedBroker> broker_;
  CredentialRegistry registry_;
  std::map<std::string, std::string> token_;
  std::map<std::string, Credential> cred_;
  std::unique_ptr<ApiServer> api_;
};

TEST_F(FairShareApi, ATokenAtItsShareOfConnectionsGets429WhileApproversAndHealthzAreServed) {
  FairShareLimits l;
  l.max_connections_per_token = 3;
  mcp::HttpEndpointLimits ml;
  ml.max_streams_per_agent = 10;  // the connection cap is what stops it here
  Start(l, ml);
  const std::string s = Session("agent");
  ASSERT_FALSE(s.empty());
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    auto [fd, head] = OpenStream("agent", s);
    ASSERT_NE(head.find("200 OK"), std::string::npos) << head;
    held.push_back(fd);
  }
  auto [fd, head] = OpenStream("agent", s);
  EXPECT_NE(head.find("429"), std::string::npos) << head;
  EXPECT_NE(head.find("Retry-After: 1"), std::string::npos) << head;
  ::close(fd);
  Answer refused = Get("/v1/tools?agent=a1", "agent");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.body["error"]["code"], "E_TOO_MANY_CONNECTIONS");
  EXPECT_EQ(Get("/healthz", "").status, 200);
  EXPECT_EQ(Get("/v1/approvals", "approver").status, 200);
  EXPECT_EQ(Get("/v1/whoami", "agent2").status, 200) << "another org's agent";
  // Every slot comes back once the client hangs up.
  for (int h : held) ::close(h);
  EXPECT_TRUE(
      Until([](const Json& j) { return j["connections"]["agent"] == 0 && j["mcp"]["streams"] == 0; }, 5s));
}

TEST_F(FairShareApi, AnAgentsStreamsPastItsCapGet429WithTheirCode) {
  mcp::HttpEndpointLimits ml;
  ml.max_streams_per_agent = 1;
  Start({}, ml);
  const std::string s = Session("agent");
  auto [fd, head] = OpenStream("agent", s);
  ASSERT_NE(head.find("200 OK"), std::string::npos) << head;
  auto [fd2, head2] = OpenStream("agent", s);
  EXPECT_NE(head2.find("429"), std::string::npos) << head2;
  const std::string refusal = head2 + ReadAll(fd2);
  EXPECT_NE(refusal.find("E_TOO_MANY_STREAMS"), std::string::npos) << refusal;
  ::close(fd2);
  ::close(fd);
}

TEST_F(FairShareApi, RevokingATokenEndsItsOpenStreamAtOnce) {
  Start({});
  const std::string s = Session("agent");
  auto [fd, head] = OpenStream("agent", s);
  ASSERT_NE(head.find("200 OK"), std::string::npos) << head;
  EXPECT_EQ(Get("/v1/connections", "admin").body["mcp"]["streams"], 1) << "the stream runs";
  registry_.Apply(CredentialRevokedEvent(cred_["agent"], "root", "leaked", kT0 + 1));
  const auto t0 = Clock::now();
  EXPECT_TRUE(ClosedWithin(fd, 5s)) << "the stream outlived its token";
  std::printf("stream ended %lld ms after the revocation\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  ::close(fd);
  EXPECT_EQ(Get("/v1/whoami", "agent").status, 401);
}

TEST_F(FairShareApi, IdleSocketsOnlyDisplaceEachOtherAndAreCutAtTheHeaderDeadline) {
  FairShareLimits l;
  l.max_unauthenticated = 4;
  l.header_deadline = 500ms;
  Start(l);
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(Connect(api_->port()));
    ::send(idle.back(), "GET /heal", 9, MSG_NOSIGNAL);
  }
  // The server has taken them all (and cut all but the pool's four).
  ASSERT_TRUE(Until([](const Json& j) { return j["refused"]["evicted"] >= 36; }, 3s));
  const auto t0 = Clock::now();
  EXPECT_EQ(Get("/healthz", "").status, 200);
  EXPECT_EQ(Get("/v1/approvals", "approver").status, 200);
  std::printf("healthz and an approver served in %lld ms behind 40 idle sockets\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  // Each is cut: displaced by a newer one, or at the header deadline.
  for (int fd : idle) EXPECT_TRUE(ClosedWithin(fd, 3s));
  EXPECT_TRUE(Until(
      [](const Json& j) { return j["connections"]["unauthenticated"] == 0 && j["refused"]["evicted"] >= 30; },
      3s));
  for (int fd : idle) ::close(fd);
}

TEST_F(FairShareApi, PendingApprovalsArePagedWithACursor) {
  Start({});
  std::vector<std::string> rids;
  for (int i = 0; i < 7; ++i) {
    testing::AskSpec spec;
    spec.request_id = "p" + std::to_string(i);
    spec.org = "o1";
    spec.agent = "a1";
    auto ask = testing::MakeAsk(spec, kT0 + i * 1000);
    for (Event e : ask.events) ASSERT_TRUE(log_->Append(e).status.ok());
    Event req = FlowEvent(ask.flow, "approval.requested", kT0 + i * 1000 + 10,
                          {{"approvers_needed", 1},
                           {"deadline", FormatTime(kT0 + 900'000'000)},
                           {"args_hash", ask.flow.args_hash},
                           {"approvers", Json::array()},
                           {"timeout_s", 900}});
    ASSERT_TRUE(log_->Append(req).status.ok());
    rids.push_back(spec.request_id);
  }
  std::vector<std::string> seen;
  std::string cursor;
  int pages = 0;
  do {
    Answer a = Get("/v1/approvals?limit=3" + (cursor.empty() ? "" : "&cursor=" + cursor), "approver");
    ASSERT_EQ(a.status, 200) << a.body.dump();
    EXPECT_EQ(a.body["total"], 7);
    EXPECT_LE(a.body["approvals"].size(), 3u);
    for (const Json& p : a.body["approvals"]) seen.push_back(p["request_id"]);
    cursor = a.body["next_cursor"];
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, rids) << "every one once, oldest first";
  Answer newest = Get("/v1/approvals?limit=2&desc=1", "approver");
  ASSERT_EQ(newest.body["approvals"].size(), 2u);
  EXPECT_EQ(newest.body["approvals"][0]["request_id"], "p6");
  EXPECT_EQ(newest.body["approvals"][1]["request_id"], "p5");
  Answer all = Get("/v1/approvals", "approver");
  EXPECT_EQ(all.body["approvals"].size(), 7u) << "a page holds 50 by default";
  EXPECT_EQ(all.body["next_cursor"], "");
  for (const char* bad : {"limit=0", "limit=501", "limit=ten", "cursor=abc", "desc=maybe"}) {
    Answer a = Get(std::string("/v1/approvals?") + bad, "approver");
    EXPECT_EQ(a.status, 400) << bad;
    EXPECT_EQ(a.body["error"]["code"], "E_INVALID_QUERY") << bad;
  }
}

}  // namespace
}  // namespace tollgate
