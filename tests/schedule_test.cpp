// Duragent's `schedule` built-in (core/schedules.h, execute/tools/schedule.cpp,
// deploy/scheduler.h): the fold of schedules over the log, the tool's
// checks, ingest's check of a fire, and - through `tollgate up` as a real
// process, killed with SIGKILL between create and due time - a scheduled
// call that fires once and a cancelled one that never does.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "audit/log_sink.h"
#include "audit/log_store.h"
#include "core/request_state.h"
#include "core/schedules.h"
#include "deploy/endpoints.h"
#include "execute/tools/tools.h"
#include "test_util.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::TempDir;

constexpr int64_t kNow = 1'800'000'000'000'000;  // a fixed "now" for the pure parts
constexpr int64_t kSec = 1'000'000;

Event Ev(const std::string& type, const std::string& org, const std::string& agent,
         const std::string& session, const std::string& rid, const std::string& tool, Json data,
         uint64_t seq) {
  Event e;
  e.type = type;
  e.org_id = org;
  e.agent_id = agent;
  e.session_id = session;
  e.request_id = rid;
  e.tool = tool;
  e.id = MakeRequestEventId(org, type, rid);
  e.time_us = kNow;
  e.data = std::move(data);
  e.seq = seq;
  return e;
}

// The execution.completed of a schedule call whose result data is `data`.
Event Done(const std::string& org, const std::string& agent, const std::string& rid, Json data, uint64_t seq,
           bool ok = true) {
  return Ev("execution.completed", org, agent, "s1", rid, "schedule",
            {{"result", {{"success", ok}, {"data", std::move(data)}}}}, seq);
}
Event Created(const std::string& org, const std::string& agent, const std::string& rid, int64_t due,
              uint64_t seq) {
  return Done(org, agent, rid,
              {{"action", "create"},
               {"schedule_id", ScheduleIdOf(org, rid)},
               {"due_at", FormatTime(due)},
               {"tool", "echo"},
               {"args", {{"text", "fired"}}},
               {"status", "scheduled"}},
              seq);
}
Event Cancelled(const std::string& org, const std::string& agent, const std::string& rid,
                const std::string& sid, uint64_t seq) {
  return Done(org, agent, rid, {{"action", "cancel"}, {"schedule_id", sid}, {"status", "cancelled"}}, seq);
}

TEST(ScheduleFold, ACreateIsScheduledACancelOrAFireEndsIt) {
  ScheduleBook book;
  const std::string a = ScheduleIdOf("o1", "c1"), b = ScheduleIdOf("o1", "c2");
  EXPECT_TRUE(book.Apply(Created("o1", "a1", "c1", kNow + 60 * kSec, 1)));
  EXPECT_TRUE(book.Apply(Created("o1", "a1", "c2", kNow + 60 * kSec, 2)));
  ASSERT_NE(book.Find(a), nullptr);
  EXPECT_EQ(book.Find(a)->state, ScheduleEntry::State::kScheduled);
  EXPECT_EQ(book.Find(a)->ToJson()["args"]["text"], "fired");

  EXPECT_TRUE(book.Apply(Cancelled("o1", "a1", "x1", a, 3)));
  EXPECT_EQ(book.Find(a)->state, ScheduleEntry::State::kCancelled);
  EXPECT_EQ(book.Find(a)->ToJson()["cancelled_by"], "x1");

  EXPECT_TRUE(book.Apply(Ev("request.received", "o1", "a1", "s1", FireRequestIdOf(b), "echo", {}, 4)));
  EXPECT_EQ(book.Find(b)->state, ScheduleEntry::State::kFired);
  EXPECT_EQ(book.Find(b)->ToJson()["fired_request_id"], FireRequestIdOf(b));
  EXPECT_FALSE(book.Apply(Cancelled("o1", "a1", "x2", b, 5))) << "a fired schedule cannot be cancelled";
  EXPECT_EQ(book.Find(b)->state, ScheduleEntry::State::kFired);
  EXPECT_EQ(book.OfAgent("o1", "a1").size(), 2u);
  EXPECT_TRUE(book.OfAgent("o1", "a2").empty());
}

TEST(ScheduleFold, AnotherAgentsCancelAndFailedOrForgedCreatesChangeNothing) {
  ScheduleBook book;
  const std::string a = ScheduleIdOf("o1", "c1");
  book.Apply(Created("o1", "a1", "c1", kNow + 60 * kSec, 1));
  EXPECT_FALSE(book.Apply(Cancelled("o1", "a2", "x1", a, 2))) << "another agent's cancel";
  EXPECT_FALSE(book.Apply(Cancelled("o2", "a1", "x1", a, 3))) << "another org's cancel";
  EXPECT_FALSE(book.Apply(Ev("request.received", "o2", "a1", "s1", FireRequestIdOf(a), "echo", {}, 4)))
      << "another org's request with the fire id";
  const Json unproven{{"error", {{"code", errc::kScheduleUnproven}}}};
  EXPECT_FALSE(book.Apply(Ev("request.rejected", "o1", "a1", "s1", FireRequestIdOf(a), "echo", unproven, 4)))
      << "a claim the log did not bear out (the agent's own forgery) ends nothing";
  EXPECT_EQ(book.Find(a)->state, ScheduleEntry::State::kScheduled);
  const Json secrets{{"error", {{"code", errc::kScheduleSecrets}}}};
  EXPECT_TRUE(book.Apply(Ev("request.rejected", "o1", "a1", "s1", FireRequestIdOf(a), "echo", secrets, 4)))
      << "the scheduler's fire, refused for good, ends it";
  EXPECT_EQ(book.Find(a)->state, ScheduleEntry::State::kFired);

  EXPECT_FALSE(book.Apply(Done("o1", "a1", "c3",
                               {{"action", "create"},
                                {"schedule_id", ScheduleIdOf("o1", "c3")},
                                {"due_at", FormatTime(kNow)},
                                {"tool", "echo"}},
                               5, /*ok=*/false)))
      << "a failed create";
  EXPECT_FALSE(book.Apply(Done("o1", "a1", "c4",
                               {{"action", "create"},
                                {"schedule_id", "sch-chosen-by-the-result"},
                                {"due_at", FormatTime(kNow)},
                                {"tool", "echo"}},
                               6)))
      << "a schedule_id that is not the create's own";
  EXPECT_EQ(book.size(), 1u);
}

// The schedule calls of a small log, queried as LogAuditReader would.
class FakeLog : public AuditReader {
 public:
  Status Query(const std::string& org, const Json& q, Json* page) override {
    Json events = Json::array();
    const std::string types = q.value("types", "");
    for (const Event& e : events_) {
      if (e.org_id != org || (q.contains("agent_id") && e.agent_id != q["agent_id"]) ||
          (q.contains("tool") && e.tool != q["tool"]) ||
          (q.contains("request_id") && e.request_id != q["request_id"]) ||
          (!types.empty() && types.find(e.type) == std::string::npos)) {
        continue;
      }
      events.push_back(e.RecordJson());
    }
    *page = {{"events", events}, {"next_cursor", ""}};
    return Status::Ok();
  }
  std::vector<Event> events_;
};

class ScheduleToolTest : public ::testing::Test {
 protected:
  Json Call(Json args, const std::string& rid = "r1", const std::string& agent = "a1") {
    ToolContext ctx;
    ctx.org_id = "o1";
    ctx.agent_id = agent;
    ctx.session_id = "s1";
    ctx.request_id = rid;
    ctx.now_us = kNow;
    ctx.policy = &policy_;
    ctx.audit = &log_;
    return tool_->Run(args, ctx);
  }
  static std::string Code(const Json& r) { return r["success"] ? "" : r["error"].value("code", ""); }

  std::unique_ptr<Tool> tool_ = MakeSchedule();
  ExecutePolicy policy_;
  FakeLog log_;
};

TEST_F(ScheduleToolTest, CreateReturnsTheDeterministicScheduleAndItsDueTime) {
  Json r = Call({{"action", "create"}, {"tool", "echo"}, {"args", {{"text", "fired"}}}, {"delay_seconds", 3}},
                "c1");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["schedule_id"], ScheduleIdOf("o1", "c1"));
  EXPECT_EQ(r["data"]["due_at"], FormatTime(kNow + 3 * kSec));
  EXPECT_EQ(r["data"]["status"], "scheduled");
  EXPECT_EQ(r["data"]["args"]["text"], "fired");
  r = Call({{"action", "create"}, {"tool", "echo"}, {"at", FormatTime(kNow + 3600 * kSec)}}, "c1");
  EXPECT_EQ(r["data"]["schedule_id"], ScheduleIdOf("o1", "c1")) << "the same request, the same id";
  EXPECT_EQ(r["data"]["due_at"], FormatTime(kNow + 3600 * kSec));
}

TEST_F(ScheduleToolTest, CreateRefusesItselfThePastBeyondThirtyDaysAndBadArgs) {
  auto code = [&](Json extra) {
    Json a{{"action", "create"}, {"tool", "echo"}, {"args", {{"text", "x"}}}};
    a.update(extra);
    return Code(Call(a));
  };
  EXPECT_EQ(code({{"tool", "schedule"}, {"delay_seconds", 5}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"at", FormatTime(kNow - kSec)}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"at", FormatTime(kNow + 31LL * 86400 * kSec)}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"at", "tomorrow"}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"at", FormatTime(kNow + 60 * kSec)}, {"delay_seconds", 60}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"delay_seconds", 0}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"delay_seconds", 9'000'000'000'000'000'000LL}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"args", "text"}, {"delay_seconds", 5}}), "E_INVALID_ARGS");
  EXPECT_EQ(code({{"tool", "read_file"}, {"args", {{"nope", 1}}}, {"delay_seconds", 5}}), "E_INVALID_ARGS")
      << "the scheduled call's args are checked as ingest will";
  EXPECT_EQ(code({{"delay_seconds", 5}}), "");
}

TEST_F(ScheduleToolTest, CancelOnlyTheAgentsOwnAndOnlyWhileNotFiredNorDue) {
  const std::string mine = ScheduleIdOf("o1", "c1"), soon = ScheduleIdOf("o1", "c2"),
                    fired = ScheduleIdOf("o1", "c3"), theirs = ScheduleIdOf("o1", "c9");
  log_.events_ = {
      Created("o1", "a1", "c1", kNow + 60 * kSec, 1), Created("o1", "a1", "c2", kNow + kSec, 2),
      Created("o1", "a1", "c3", kNow - kSec, 3), Created("o1", "a2", "c9", kNow + 60 * kSec, 4),
      Ev("request.received", "o1", "a1", "s1", FireRequestIdOf(fired), "echo", Json::object(), 5)};
  EXPECT_EQ(Code(Call({{"action", "cancel"}, {"schedule_id", theirs}})), errc::kScheduleNotFound);
  EXPECT_EQ(Code(Call({{"action", "cancel"}, {"schedule_id", "sch-nothing"}})), errc::kScheduleNotFound);
  EXPECT_EQ(Code(Call({{"action", "cancel"}, {"schedule_id", fired}})), errc::kScheduleDone);
  EXPECT_EQ(Code(Call({{"action", "cancel"}, {"schedule_id", soon}})), errc::kScheduleDone)
      << "due within 2 s";
  Json r = Call({{"action", "cancel"}, {"schedule_id", mine}}, "x1");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["status"], "cancelled");
  log_.events_.push_back(Done("o1", "a1", "x1", r["data"], 6));
  EXPECT_EQ(Code(Call({{"action", "cancel"}, {"schedule_id", mine}})), errc::kScheduleDone)
      << "cancelled already";

  r = Call({{"action", "list"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  ASSERT_EQ(r["data"]["count"], 1) << "pending only: " << r.dump();
  EXPECT_EQ(r["data"]["schedules"][0]["schedule_id"], soon);
  r = Call({{"action", "list"}, {"include_done", true}});
  ASSERT_EQ(r["data"]["count"], 3) << r.dump();
  EXPECT_EQ(r["data"]["schedules"][0]["status"], "cancelled");
  EXPECT_EQ(r["data"]["schedules"][2]["status"], "fired");
  EXPECT_EQ(r["data"]["schedules"][2]["fired_request_id"], FireRequestIdOf(fired));
}

// The create's events as the log holds them, for ingest's check.
std::vector<Event> CreateEvents(const std::string& rid, Json call, Json redacted = Json::array()) {
  Json args = call;
  args["action"] = "create";
  Json req{{"request_id", rid},  {"org_id", "o1"},     {"agent_id", "a1"}, {"session_id", "s1"},
           {"tool", "schedule"}, {"action", "create"}, {"args", args}};
  return {Ev("request.received", "o1", "a1", "s1", rid, "schedule",
             {{"request", req}, {"redacted", redacted}}, 1),
          Created("o1", "a1", rid, kNow, 2)};
}

TEST(ScheduleIngestCheck, AFireIsBelievedOnlyAsTheLogsCreateSaysIt) {
  const std::string sid = ScheduleIdOf("o1", "c1");
  const Json call{{"tool", "echo"}, {"args", {{"text", "fired"}}}, {"delay_seconds", 3}};
  auto fire = [&](Json patch = Json::object()) {
    Json r{{"request_id", FireRequestIdOf(sid)},
           {"org_id", "o1"},
           {"agent_id", "a1"},
           {"session_id", "s1"},
           {"tool", "echo"},
           {"args", {{"text", "fired"}}},
           {"metadata", {{"scheduled_by", sid}, {"schedule_request_id", "c1"}}}};
    r.merge_patch(patch);
    return r;
  };
  auto check = [&](const Json& req, std::vector<Event> create, int64_t now = kNow) {
    return CheckScheduledRequest(req, req.value("request_id", ""), create, now).code();
  };
  EXPECT_TRUE(ClaimsScheduled(fire(), FireRequestIdOf(sid)));
  EXPECT_TRUE(ClaimsScheduled(fire({{"request_id", "plain"}}), "plain"))
      << "metadata.scheduled_by claims it too";
  EXPECT_EQ(check(fire(), CreateEvents("c1", call)), "");
  const std::string bad = errc::kScheduleUnproven;
  EXPECT_EQ(check(fire({{"args", {{"text", "other"}}}}), CreateEvents("c1", call)), bad);
  EXPECT_EQ(check(fire({{"tool", "current_time"}}), CreateEvents("c1", call)), bad);
  EXPECT_EQ(check(fire({{"session_id", "s2"}}), CreateEvents("c1", call)), bad);
  EXPECT_EQ(check(fire({{"agent_id", "a2"}}), CreateEvents("c1", call)), bad);
  EXPECT_EQ(check(fire({{"action", "x"}}), CreateEvents("c1", call)), bad);
  EXPECT_EQ(check(fire({{"request_id", "fire-sch-0"}}), CreateEvents("c1", call)), bad);
  EXPECT_EQ(check(fire(), {}), bad) << "no create in the log";
  EXPECT_EQ(check(fire(), CreateEvents("c1", call), kNow - 6 * kSec), bad) << "before its due time";
  EXPECT_EQ(check(fire(), CreateEvents("c1", call, Json::array({"/args/args/text"}))), errc::kScheduleSecrets)
      << "its args held secrets the log keeps redacted";
  std::vector<Event> failed = CreateEvents("c1", call);
  failed[1].data["result"]["success"] = false;
  EXPECT_EQ(check(fire(), failed), bad) << "the create failed";
}

// ------------------------------------------------------- the real pipeline

std::string Sh(const std::vector<std::string>& argv, const std::string& dir, const std::string& name,
               int* rc) {
  testing::ChildProcess c;
  EXPECT_TRUE(c.Start(argv, dir + "/" + name + ".out", dir + "/" + name + ".err"));
  auto st = c.Wait(seconds(60));
  *rc = st.value_or(-2);
  return c.out() + (c.out().empty() ? c.err() : "");
}

// The events of request `rid` of org o1 in the live log (a secondary that catches up).
std::vector<Event> EventsOf(LogStore& store, const std::string& rid) {
  std::vector<Event> out;
  if (!store.CatchUp().ok()) return out;
  StoreLogView(store).EventsOfRequest("o1", rid, &out);
  return out;
}

TEST(SchedulePipeline, FiresOnceAcrossAKillNineAndNeverWhenCancelled) {
  TempDir dir;
  const std::string data = dir.sub("data"), policy = dir.sub("policy.yaml");
  std::ofstream(policy) << "version: 1\nmode: ask\nallow:\n  - builtin:echo\n  - \"builtin:schedule:*\"\n";
  int rc = 0;
  std::string out = Sh({TOLLGATE_BIN, "agents", "add", "--data", data, "--org", "o1", "--agent", "a1"},
                       dir.path(), "agents", &rc);
  ASSERT_EQ(rc, 0) << out;
  auto up = std::make_unique<testing::ChildProcess>();
  int starts = 0;
  auto start_up = [&] {
    std::filesystem::remove(data + "/endpoints.json");
    up = std::make_unique<testing::ChildProcess>();
    const std::string n = dir.sub("up" + std::to_string(++starts));
    ASSERT_TRUE(up->Start({TOLLGATE_BIN, "up", "--data", data, "--policy", policy, "--durability", "sync"},
                          n + ".out", n + ".err"));
    ASSERT_TRUE(
        testing::WaitUntil([&] { return up->Poll() || std::filesystem::exists(data + "/endpoints.json"); },
                           seconds(60)) &&
        !up->Poll())
        << up->out() << up->err();
  };
  int calls = 0;
  auto submit = [&](const std::string& rid, const std::string& tool, const std::string& action, Json args) {
    std::vector<std::string> argv = {TOLLGATE_BIN, "submit",  "--data",    data,        "--org",
                                     "o1",         "--agent", "a1",        "--session", "s1",
                                     "--tool",     tool,      "--args",    args.dump(), "--request-id",
                                     rid,          "--wait",  "--timeout", "30"};
    if (!action.empty()) argv.insert(argv.end(), {"--action", action});
    const std::string text = Sh(argv, dir.path(), "submit" + std::to_string(++calls), &rc);
    Json r = Json::parse(text, nullptr, false);
    EXPECT_TRUE(r.is_object()) << text;
    return r.is_object() ? r : Json::object();
  };

  start_up();
  // An agent's own request claiming to be a fire is refused (and warms the pipeline up).
  const std::string sid_b = ScheduleIdOf("o1", "cB");
  Json forged = submit(FireRequestIdOf(sid_b), "echo", "", {{"text", "cancelled"}});
  EXPECT_EQ(forged.value("status", ""), "rejected") << forged.dump();
  EXPECT_EQ(forged["result"]["error"].value("code", ""), errc::kScheduleUnproven) << forged.dump();

  // B is due first and cancelled; A is due a second after it.
  const int64_t t0 = NowMicros();
  Json b = submit("cB", "schedule", "create",
                  {{"tool", "echo"}, {"args", {{"text", "cancelled"}}}, {"at", FormatTime(t0 + 6 * kSec)}});
  ASSERT_EQ(b.value("status", ""), "completed") << b.dump();
  ASSERT_EQ(b["result"]["data"]["schedule_id"], sid_b);
  Json x = submit("xB", "schedule", "cancel", {{"schedule_id", sid_b}});
  ASSERT_EQ(x.value("status", ""), "completed") << "cancelled more than 2 s ahead: " << x.dump();
  Json a = submit("cA", "schedule", "create",
                  {{"tool", "echo"}, {"args", {{"text", "fired"}}}, {"at", FormatTime(t0 + 7 * kSec)}});
  ASSERT_EQ(a.value("status", ""), "completed") << a.dump();
  const std::string sid_a = a["result"]["data"]["schedule_id"];
  int64_t due_a = 0, due_b = 0;
  ASSERT_TRUE(ParseTime(a["result"]["data"].value("due_at", ""), &due_a));
  ASSERT_TRUE(ParseTime(b["result"]["data"].value("due_at", ""), &due_b));
  ASSERT_LT(due_b, due_a);

  // kill -9 before either is due; restart once both are overdue.
  up.reset();
  // time must pass: the real `up` reads the wall clock (it takes no clock), and both must be overdue.
  std::this_thread::sleep_for(milliseconds(std::max<int64_t>(0, (due_a - NowMicros()) / 1000 + 200)));
  start_up();
  std::unique_ptr<LogStore> log;
  ASSERT_TRUE(LogStore::Open(data + "/log", OpenMode::kSecondary, &log).ok());
  const std::string fire_a = FireRequestIdOf(sid_a), fire_b = FireRequestIdOf(sid_b);
  // A fires right after the restart. B, due before it on the same agent's
  // partition, would have been received first had it fired.
  ASSERT_TRUE(
      testing::WaitUntil([&] { return Summarize(EventsOf(*log, fire_a)).completed != nullptr; }, seconds(30)))
      << up->err();
  std::vector<Event> fa = EventsOf(*log, fire_a);
  RequestState st = Summarize(fa);
  EXPECT_EQ(st.completed->data["result"]["data"].value("text", ""), "fired");
  EXPECT_EQ(st.received->data["request"]["metadata"].value("scheduled_by", ""), sid_a);
  EXPECT_EQ(st.received->data.value("via", ""), "tollgate-api") << "signed by the service key on a1's behalf";
  int64_t received_at = 0;
  ASSERT_TRUE(ParseTime(st.received->data.value("received_at", ""), &received_at));
  EXPECT_GE(received_at, due_a) << "decided at its fire time, not before";
  const auto only_forged = [&] {
    for (const Event& e : EventsOf(*log, fire_b)) {
      if (e.type != "request.rejected" || e.data["error"].value("code", "") != errc::kScheduleUnproven)
        return false;
    }
    return true;
  };
  EXPECT_TRUE(only_forged()) << "the cancelled schedule never fired";

  // A second kill -9 and restart: the fired one is not fired again.
  up.reset();
  start_up();
  Json list = submit("l1", "schedule", "list", {{"include_done", true}});
  ASSERT_EQ(list.value("status", ""), "completed") << list.dump();
  std::map<std::string, std::string> status;
  for (const Json& s : list["result"]["data"]["schedules"]) status[s["schedule_id"]] = s["status"];
  EXPECT_EQ(status[sid_a], "fired") << list.dump();
  EXPECT_EQ(status[sid_b], "cancelled") << list.dump();
  int received = 0, completed = 0;
  for (const Event& e : EventsOf(*log, fire_a)) {
    received += e.type == "request.received";
    completed += e.type == "execution.completed";
  }
  EXPECT_EQ(received, 1);
  EXPECT_EQ(completed, 1);
  EXPECT_TRUE(only_forged());
  log.reset();
  up.reset();

  // The session's timeline holds both, and re-deciding it finds no difference.
  out = Sh({TOLLGATE_BIN, "replay", "s1", "--data", data}, dir.path(), "replay", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(fire_a), std::string::npos) << out;
  EXPECT_NE(out.find("xB"), std::string::npos) << out;
  out = Sh({TOLLGATE_BIN, "replay", "s1", "--data", data, "--verify"}, dir.path(), "verify", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("5 decisions re-decided, 0 differ"), std::string::npos)
      << "cB, xB, cA, its fire, l1: " << out;
}

}  // namespace
}  // namespace tollgate
