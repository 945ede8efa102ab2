// background_process (Duragent's): long-running programs in the agent's
// sandbox with a terminal, through the tool as execute runs it. Programs are
// cat, sleep and the suite's exec_helper (flood, fork bomb, spin), each
// allowlisted as execute_command would need.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "execute/tools/tools.h"
#include "tests/child_process.h"
#include "tests/execute_test_util.h"

namespace tollgate {
namespace {

using testing::ToolFixture;
using Clock = std::chrono::steady_clock;

// True once `pred` holds, false after `limit`.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  return tollgate::testing::WaitUntil(pred, limit);
}

class BackgroundProcessTest : public ::testing::Test, public ToolFixture {
 protected:
  BackgroundProcessTest() { helper_ = AllowExecHelper(EXEC_HELPER); }
  // One call; each spawn needs its own request id (the process id is its hash).
  Json Bp(const Json& args, const std::string& request_id = "r1", const std::string& agent = "a1") {
    ToolContext c = Ctx("o1", agent);
    c.request_id = request_id;
    return tool_->Run(args, c);
  }
  std::string Spawn(const std::string& command, const std::string& request_id,
                    const std::string& agent = "a1") {
    Json r = Bp({{"action", "spawn"}, {"command", command}}, request_id, agent);
    EXPECT_TRUE(r["success"]) << r.dump();
    EXPECT_EQ(r["data"]["status"], "running");
    EXPECT_FALSE(r["data"].contains("pid")) << "no host pid leaves the tool";
    return r["data"].value("process_id", "");
  }
  Json Status(const std::string& id, const std::string& agent = "a1") {
    return Bp({{"action", "status"}, {"process_id", id}}, "r1", agent);
  }
  std::string Log(const std::string& id) {
    return Bp({{"action", "log"}, {"process_id", id}})["data"].value("output", "");
  }
  bool Ended(const std::string& id) { return Status(id)["data"].value("status", "") != "running"; }

  std::string helper_;
  std::shared_ptr<const Tool> tool_ = registry_.Find("background_process");
};

TEST_F(BackgroundProcessTest, SpawnedCatEchoesWhatIsWrittenAndIsKilled) {
  const std::string id = Spawn("cat", "req-cat");
  EXPECT_EQ(id.rfind("bp-", 0), 0u);
  EXPECT_EQ(id.size(), 15u);
  Json w = Bp({{"action", "write"}, {"process_id", id}, {"input", "hello there\n"}});
  ASSERT_TRUE(w["success"]) << w.dump();
  EXPECT_EQ(w["data"]["written"], 12);
  // The terminal echoes the line, then cat prints it: twice.
  ASSERT_TRUE(WaitFor([&] {
    const std::string log = Log(id);
    return log.find("hello there") != log.rfind("hello there");
  })) << Log(id);
  ASSERT_TRUE(
      Bp({{"action", "send_keys"}, {"process_id", id}, {"keys", {"abc", "Tab", "d", "Enter"}}})["success"]);
  ASSERT_TRUE(WaitFor([&] { return Log(id).find("abc\td") != std::string::npos; })) << Log(id);

  Json list = Bp({{"action", "list"}});
  ASSERT_EQ(list["data"]["count"], 1);
  EXPECT_EQ(list["data"]["processes"][0]["process_id"], id);
  EXPECT_EQ(list["data"]["processes"][0]["command"], "cat");

  Json k = Bp({{"action", "kill"}, {"process_id", id}});
  ASSERT_TRUE(k["success"]) << k.dump();
  EXPECT_EQ(k["data"]["status"], "killed") << "kill returns once it ended";
  EXPECT_FALSE(k["data"]["ended_at"].is_null());
  EXPECT_EQ(Code(Bp({{"action", "write"}, {"process_id", id}, {"input", "x"}})), "E_PROCESS_EXITED");
  EXPECT_TRUE(Bp({{"action", "kill"}, {"process_id", id}})["success"])
      << "killing an ended process answers it";
}

TEST_F(BackgroundProcessTest, CaptureShowsTheScreenWithoutEscapeSequences) {
  // Colours, a title, a line overwritten after \r, an erased tail, printed
  // by the program (input would be echoed with its escapes made visible).
  const std::string id = Spawn(helper_ +
                                   " args '\x1b[31mred\x1b[0m \x1b]0;title\x07plain' 'first\rFIRST' "
                                   "'keep-gone\x1b[5D\x1b[K'",
                               "req-capture");
  ASSERT_TRUE(WaitFor([&] { return Ended(id); }));
  Json c = Bp({{"action", "capture"}, {"process_id", id}, {"lines", 3}});
  ASSERT_TRUE(c["success"]) << c.dump();
  EXPECT_EQ(c["data"]["screen"], "red plain\nFIRST\nkeep") << c.dump();
  EXPECT_EQ(c["data"]["lines"], 3);
  EXPECT_EQ(Bp({{"action", "capture"}, {"process_id", id}, {"lines", 1}})["data"]["screen"], "keep");
  const std::string log = Log(id);
  EXPECT_NE(log.find("\x1b[31mred"), std::string::npos) << "log is the raw output";
}

TEST_F(BackgroundProcessTest, ControlCInterruptsTheProgramAsATerminalWould) {
  const std::string id = Spawn("cat", "req-ctrl-c");
  ASSERT_TRUE(Bp({{"action", "write"}, {"process_id", id}, {"input", "up\n"}})["success"]);
  ASSERT_TRUE(WaitFor([&] { return Log(id).find("up") != Log(id).rfind("up"); })) << "cat runs";
  ASSERT_TRUE(Bp({{"action", "send_keys"}, {"process_id", id}, {"keys", "C-c"}})["success"]);
  ASSERT_TRUE(WaitFor([&] { return Ended(id); }));
  Json s = Status(id);
  EXPECT_EQ(s["data"]["status"], "exited");
  EXPECT_EQ(s["data"]["signal"], 2) << s.dump();
}

TEST_F(BackgroundProcessTest, WatchRecordsTheFirstMatchingLineInPolynomialTime) {
  const std::string id = Spawn("cat", "req-watch");
  EXPECT_EQ(Code(Bp({{"action", "watch"}, {"process_id", id}, {"pattern", "(a"}})), "E_INVALID_ARGS");
  EXPECT_EQ(Code(Bp({{"action", "watch"}, {"process_id", id}, {"pattern", "(a)\\1"}})), "E_INVALID_ARGS")
      << "backreferences need backtracking";
  EXPECT_EQ(Code(Bp({{"action", "watch"}, {"process_id", id}, {"pattern", std::string(300, 'a')}})),
            "E_INVALID_ARGS");
  // A pattern that backtracks exponentially elsewhere, against a long line.
  Json w = Bp({{"action", "watch"}, {"process_id", id}, {"pattern", "^(a|a)*b$"}});
  ASSERT_TRUE(w["success"]) << w.dump();
  ASSERT_TRUE(
      Bp({{"action", "write"}, {"process_id", id}, {"input", std::string(900, 'a') + "c\n"}})["success"]);
  ASSERT_TRUE(WaitFor([&] { return Log(id).size() > 1800; }));
  EXPECT_FALSE(Status(id)["data"]["watch"]["matched"]);
  ASSERT_TRUE(Bp({{"action", "watch"}, {"process_id", id}, {"pattern", "^ready [0-9]+$"}})["success"]);
  ASSERT_TRUE(
      Bp({{"action", "write"}, {"process_id", id}, {"input", "not ready\nready 42\nready 43\n"}})["success"]);
  ASSERT_TRUE(WaitFor([&] { return Status(id)["data"]["watch"]["matched"] == true; })) << Status(id).dump();
  EXPECT_EQ(Status(id)["data"]["watch"]["match"]["line"], "ready 42");
  Json list = Bp({{"action", "list"}});
  EXPECT_EQ(list["data"]["processes"][0]["watch"]["match"]["line"], "ready 42");
  ASSERT_TRUE(Bp({{"action", "unwatch"}, {"process_id", id}})["success"]);
  EXPECT_FALSE(Status(id)["data"].contains("watch"));
  Bp({{"action", "kill"}, {"process_id", id}, {"signal", "KILL"}});
}

TEST_F(BackgroundProcessTest, OutputFloodIsKeptWithinOutputBytes) {
  policy().background.output_bytes = 64 << 10;
  const std::string tag = UniqueTag();
  const std::string id = Spawn(helper_ + " flood " + tag, "req-flood");
  ASSERT_TRUE(WaitFor([&] { return Status(id)["data"].value("output_bytes", 0) > (1 << 20); }))
      << Status(id).dump();
  Json log = Bp({{"action", "log"}, {"process_id", id}, {"offset", 0}});
  ASSERT_TRUE(log["success"]);
  EXPECT_GT(log["data"]["dropped_bytes"].get<int64_t>(), 0);
  EXPECT_GE(log["data"]["offset"].get<int64_t>(), log["data"]["dropped_bytes"].get<int64_t>())
      << "starts at the oldest byte kept";
  EXPECT_LE(log["data"]["output"].get<std::string>().size(), size_t{64 << 10});
  EXPECT_EQ(log["data"]["output"].get<std::string>().find_first_not_of('y'), std::string::npos);
  ASSERT_TRUE(Bp({{"action", "kill"}, {"process_id", id}})["success"]);
  EXPECT_EQ(testing::SurvivorsAfterTeardown(tag), 0);
}

TEST_F(BackgroundProcessTest, ForkBombStaysWithinItsPidsAndTheToolAnswers) {
  policy().background.pids = 16;
  const std::string tag = UniqueTag();
  const std::string id = Spawn(helper_ + " forkbomb " + tag, "req-bomb");
  ASSERT_TRUE(WaitFor([&] { return testing::Survivors(tag) >= 8; }));
  int most = 0;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    ASSERT_TRUE(Status(id)["success"]);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1)) << "the tool stays responsive";
    most = std::max(most, testing::Survivors(tag));
    // time must pass: the count is sampled while the bomb keeps forking.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_LE(most, 16) << "RLIMIT_NPROC under the agent's uid";
  Json k = Bp({{"action", "kill"}, {"process_id", id}, {"signal", "KILL"}});
  EXPECT_EQ(k["data"]["status"], "killed") << k.dump();
  EXPECT_EQ(testing::SurvivorsAfterTeardown(tag), 0);
}

TEST_F(BackgroundProcessTest, OneSpawnPastMaxPerAgentIsRefusedAndAgentsAreApart) {
  policy().background.max_per_agent = 2;
  const std::string a = Spawn("sleep 600", "req-a");
  const std::string b = Spawn("sleep 600", "req-b");
  Json r = Bp({{"action", "spawn"}, {"command", "sleep 600"}}, "req-c");
  EXPECT_EQ(Code(r), "E_LIMIT_EXCEEDED") << r.dump();
  EXPECT_TRUE(r["error"]["recoverable"]);
  // Another agent: its own limit, and the first agent's processes are not its.
  const std::string other = Spawn("sleep 600", "req-other", "a2");
  EXPECT_EQ(Code(Status(a, "a2")), "E_NOT_FOUND");
  EXPECT_EQ(Code(Bp({{"action", "kill"}, {"process_id", a}}, "r1", "a2")), "E_NOT_FOUND");
  EXPECT_EQ(Bp({{"action", "list"}}, "r1", "a2")["data"]["count"], 1);
  EXPECT_EQ(Status(a)["data"]["status"], "running");
  ASSERT_TRUE(Bp({{"action", "kill"}, {"process_id", a}})["success"]);
  EXPECT_TRUE(Bp({{"action", "spawn"}, {"command", "sleep 600"}}, "req-c")["success"]) << "room again";
  EXPECT_EQ(Bp({{"action", "spawn"}, {"command", "sleep 600"}}, "req-c")["data"]["status"], "running")
      << "the same request names the same process: nothing new starts";
  for (const auto& [id, agent] : {std::pair{b, "a1"}, {other, "a2"}}) {
    Bp({{"action", "kill"}, {"process_id", id}, {"signal", "KILL"}}, "r1", agent);
  }
}

TEST_F(BackgroundProcessTest, SpawnRefusesWhatBashRefuses) {
  EXPECT_EQ(Code(Bp({{"action", "spawn"}, {"command", "python3 -c 'print(1)'"}}, "x1")), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Bp({{"action", "spawn"}, {"command", "cat $(ls)"}}, "x2")), "E_CMD_NOT_ALLOWED");
  EXPECT_EQ(Code(Bp({{"action", "spawn"}, {"command", "cat > /etc/x"}}, "x3")), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Bp({{"action", "spawn"}, {"command", "cat |"}}, "x4")), "E_INVALID_ARGS");
  EXPECT_EQ(Code(Bp({{"action", "spawn"}}, "x5")), "E_INVALID_ARGS");
  EXPECT_EQ(Code(Bp({{"action", "status"}, {"process_id", "bp-000000000000"}})), "E_NOT_FOUND");
  EXPECT_EQ(Code(Bp({{"action", "log"}})), "E_INVALID_ARGS");
  EXPECT_EQ(Code(Bp({{"action", "dance"}, {"process_id", "x"}})), "E_INVALID_ARGS");
  EXPECT_EQ(Bp({{"action", "list"}})["data"]["count"], 0) << "nothing started";
}

TEST_F(BackgroundProcessTest, AProcessPastItsLifetimeIsKilled) {
  policy().background.max_lifetime_s = 1;
  const std::string id = Spawn("sleep 600", "req-life");
  ASSERT_TRUE(WaitFor([&] { return Ended(id); }, std::chrono::seconds(5)));
  EXPECT_EQ(Status(id)["data"]["status"], "killed");
  EXPECT_EQ(Status(id)["data"]["reason"], "lifetime");
}

TEST_F(BackgroundProcessTest, NothingOutlivesTheTool) {
  const std::string tag = UniqueTag();
  {
    std::shared_ptr<const Tool> own = MakeBackgroundProcess();
    ToolContext c = Ctx();
    c.request_id = "req-own";
    ASSERT_TRUE(own->Run({{"action", "spawn"}, {"command", helper_ + " spin " + tag}}, c)["success"]);
    ASSERT_TRUE(WaitFor([&] { return testing::Survivors(tag) > 0; }));
  }
  EXPECT_EQ(testing::SurvivorsAfterTeardown(tag), 0);
}

// A log that holds a spawn this table never made: an earlier run's.
class EarlierRun : public AuditReader {
 public:
  Status Query(const std::string&, const Json&, Json* page) override {
    Json spawn{{"process_id", "bp-0123456789ab"},
               {"command", "sleep 600"},
               {"action", "spawn"},
               {"started_at", "2026-01-01T00:00:00.000000Z"},
               {"status", "running"}};
    Json status{{"process_id", "bp-0123456789ab"}, {"status", "running"}};  // a status answer: not a spawn
    *page = {{"events", Json::array({{{"data", {{"result", {{"success", true}, {"data", status}}}}}},
                                     {{"data", {{"result", {{"success", true}, {"data", spawn}}}}}}})},
             {"next_cursor", ""}};
    return Status::Ok();
  }
};

TEST_F(BackgroundProcessTest, ASpawnOfAnEarlierRunIsReportedLost) {
  EarlierRun log;
  audit_ = &log;
  const std::string mine = Spawn("sleep 600", "req-mine");
  Json list = Bp({{"action", "list"}});
  ASSERT_EQ(list["data"]["count"], 2) << list.dump();
  EXPECT_EQ(list["data"]["processes"][0]["process_id"], mine);
  EXPECT_EQ(list["data"]["processes"][1]["status"], "lost");
  EXPECT_EQ(list["data"]["processes"][1]["command"], "sleep 600");
  EXPECT_EQ(Status("bp-0123456789ab")["data"]["status"], "lost");
  EXPECT_EQ(Code(Bp({{"action", "log"}, {"process_id", "bp-0123456789ab"}})), "E_PROCESS_EXITED");
  audit_ = nullptr;
  Bp({{"action", "kill"}, {"process_id", mine}, {"signal", "KILL"}});
}

}  // namespace
}  // namespace tollgate
