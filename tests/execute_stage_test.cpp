// The execute stage as a (two-phase) pure core: Process appends
// execution.started and hands back the tool's run as deferred work; a
// started-but-never-completed execution is never run again: it ends a
// read-only call with E_EXECUTION_INTERRUPTED and a mutating one with
// E_OUTCOME_UNKNOWN.
#include "execute/execute_stage.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/invocation.h"
#include "core/request_state.h"
#include "core/sha256.h"
#include "deploy/reconciler.h"
#include "tests/execute_flow_util.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

// The log as a vector: a request is (org, request_id), as in the real log.
class VectorLog : public testing::MemoryLog {
 public:
  int Count(const std::string& rid, const std::string& type) const {
    int n = 0;
    for (const auto& e : events_) n += e.request_id == rid && e.type == type;
    return n;
  }
};

class ExecuteStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = std::make_shared<ExecutePolicy>(DefaultExecutePolicy(dir_.path()));
    p->run_as = "";
    policy_ = p;
    ExecuteConfig c;
    c.topics = topics_;
    c.policy = policy_;
    stage_ = std::make_unique<ExecuteStage>(c);
  }
  // Logs request.received and an allow decision for a call; the message
  // decide would send to execute.
  Message Allowed(const std::string& rid, const std::string& tool, const Json& args,
                  Json extra = Json::object()) {
    return testing::LogAllowed(&log_, topics_, rid, tool, args, extra);
  }
  StageContext Ctx(int offset) {
    return {1'790'000'000'000'000, "inc/tollgate.execute/0/" + std::to_string(offset)};
  }
  std::string Workspace() const { return dir_.path() + "/workspaces/o1/a1"; }
  Json ResultOf(const StageResult& r) {
    EXPECT_EQ(r.outputs.size(), 1u);
    return r.outputs.empty() ? Json() : Json::parse(r.outputs[0].message.value);
  }

  testing::TempDir dir_;
  Topics topics_;
  std::shared_ptr<ExecutePolicy> policy_;
  std::unique_ptr<ExecuteStage> stage_;
  VectorLog log_;
};

TEST_F(ExecuteStageTest, StartedIsLoggedBeforeTheToolRuns) {
  Message m = Allowed("w1", "write_file", {{"path", "out.txt"}, {"content", "x"}, {"append", true}});
  StageResult r = stage_->Process(m, Ctx(1), log_);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "execution.started");
  EXPECT_EQ(r.events[0].data["attempt"], 1);
  EXPECT_TRUE(r.outputs.empty());
  ASSERT_TRUE(r.deferred) << "a tool with side effects runs as deferred work";
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/out.txt")) << "nothing ran before the runner says so";
  log_.Append(r.events);
  StageResult done = r.deferred();
  ASSERT_EQ(done.events.size(), 1u);
  EXPECT_EQ(done.events[0].type, "execution.completed");
  EXPECT_TRUE(done.events[0].data["result"]["success"]) << done.events[0].data.dump();
  Json result = ResultOf(done);
  EXPECT_EQ(result["status"], "completed");
  EXPECT_EQ(done.outputs[0].log_seq_of_event, 0);
  log_.Append(done.events);
  EXPECT_TRUE(std::filesystem::exists(Workspace() + "/out.txt"));
  // A re-sent copy (another source) does nothing; the same message re-read
  // re-emits the recorded result without running.
  EXPECT_TRUE(stage_->Process(m, Ctx(9), log_).outputs.empty());
  StageResult again = stage_->Process(m, Ctx(1), log_);
  EXPECT_TRUE(again.events.empty());
  EXPECT_FALSE(again.deferred);
  EXPECT_EQ(ResultOf(again)["status"], "completed");
  std::ifstream in(Workspace() + "/out.txt");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "x") << "ran exactly once";
}

TEST_F(ExecuteStageTest, AMutatingToolStartedButNotCompletedEndsOutcomeUnknown) {
  Message m = Allowed("w2", "write_file", {{"path", "once.txt"}, {"content", "x"}, {"append", true}});
  StageResult r = stage_->Process(m, Ctx(1), log_);
  log_.Append(r.events);
  r = StageResult{};           // the crash: started is durable, the work never ran
  for (int offset : {1, 2}) {  // the same message re-read, or the reconciler's copy
    StageResult after = stage_->Process(m, Ctx(offset), log_);
    EXPECT_FALSE(after.deferred) << "it must not run again";
    ASSERT_EQ(after.events.size(), 1u);
    EXPECT_EQ(after.events[0].type, "execution.completed");
    EXPECT_EQ(after.events[0].data["result"]["error"]["code"], "E_OUTCOME_UNKNOWN");
    EXPECT_EQ(ResultOf(after)["status"], "failed");
    if (offset == 2) log_.Append(after.events);
  }
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/once.txt"));
  EXPECT_EQ(log_.Count("w2", "execution.started"), 1);
  EXPECT_EQ(Summarize(log_.events_).completed != nullptr, true);
}

TEST_F(ExecuteStageTest, TheReconcilerRedrivesAStartedButUnfinishedExecutionToExecute) {
  Message m = Allowed("w5", "write_file", {{"path", "z.txt"}, {"content", "x"}});
  log_.Append(stage_->Process(m, Ctx(1), log_).events);  // started, then the crash
  std::vector<Event> ev;
  log_.EventsOfRequest("o1", "w5", &ev);
  auto plan = PlanRedrive(ev, topics_, 5);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->message.topic, "tollgate.execute");
  StageResult after = stage_->Process(plan->message, Ctx(50), log_);
  ASSERT_EQ(after.events.size(), 1u);
  EXPECT_EQ(after.events[0].data["result"]["error"]["code"], "E_OUTCOME_UNKNOWN");
  log_.Append(after.events);
  log_.EventsOfRequest("o1", "w5", &ev);
  EXPECT_FALSE(PlanRedrive(ev, topics_, 5)) << "ended: nothing more to re-drive";
}

TEST_F(ExecuteStageTest, AReadOnlyToolStartedButNotCompletedEndsInterruptedAndIsNotRunAgain) {
  std::filesystem::create_directories(Workspace());
  std::ofstream(Workspace() + "/r.txt") << "data";
  Message m = Allowed("r1", "read_file", {{"path", "r.txt"}});
  StageResult r = stage_->Process(m, Ctx(1), log_);
  log_.Append(r.events);
  r = StageResult{};           // the crash: maybe this very call took the process down
  for (int offset : {1, 2}) {  // the same message re-read, or the reconciler's copy
    StageResult after = stage_->Process(m, Ctx(offset), log_);
    EXPECT_FALSE(after.deferred) << "a call that may have crashed the process is not run again";
    ASSERT_EQ(after.events.size(), 1u);
    EXPECT_EQ(after.events[0].type, "execution.completed");
    const Json& error = after.events[0].data["result"]["error"];
    EXPECT_EQ(error["code"], "E_EXECUTION_INTERRUPTED");
    EXPECT_EQ(error["recoverable"], true) << "the agent may retry it as a new request";
    EXPECT_NE(error["message"].get<std::string>().find("not run again"), std::string::npos) << error.dump();
    EXPECT_EQ(ResultOf(after)["status"], "failed");
    if (offset == 2) log_.Append(after.events);
  }
  EXPECT_EQ(log_.Count("r1", "execution.started"), 1);
  EXPECT_TRUE(stage_->Process(m, Ctx(3), log_).events.empty()) << "ended: a later copy appends nothing";
}

TEST_F(ExecuteStageTest, ACopyArrivingWhileTheWorkRunsIsIgnored) {
  Message m = Allowed("w3", "write_file", {{"path", "f.txt"}, {"content", "x"}});
  StageResult r = stage_->Process(m, Ctx(1), log_);
  log_.Append(r.events);
  StageResult copy = stage_->Process(m, Ctx(7), log_);
  EXPECT_TRUE(copy.events.empty() && copy.outputs.empty() && !copy.deferred)
      << "in flight here: no E_OUTCOME_UNKNOWN while it is still running";
  StageResult done = r.deferred();
  log_.Append(done.events);
  r = StageResult{};  // the work is released once its result is recorded
  EXPECT_TRUE(stage_->Process(m, Ctx(7), log_).events.empty());
  EXPECT_EQ(log_.Count("w3", "execution.completed"), 1);
}

TEST_F(ExecuteStageTest, CliToolsAreReadOnlyOnlyWhenTheDecisionSaysSo) {
  const std::string tools = dir_.path() + "/tools";
  std::filesystem::create_directories(tools + "/probe");
  std::ofstream(tools + "/probe/run") << "#!/bin/sh\necho '{\"ok\":1}'\n";
  std::filesystem::permissions(tools + "/probe/run", std::filesystem::perms(0755));
  ASSERT_EQ(stage_->registry().Reload(), 1u);
  Message ro = Allowed("c1", "cli:probe", Json::object(), {{"read_only", true}});
  log_.Append(stage_->Process(ro, Ctx(1), log_).events);
  StageResult again = stage_->Process(ro, Ctx(2), log_);
  EXPECT_FALSE(again.deferred);
  ASSERT_EQ(again.events.size(), 1u);
  EXPECT_EQ(again.events[0].data["result"]["error"]["code"], "E_EXECUTION_INTERRUPTED") << "read_only";
  Message mut = Allowed("c2", "cli:probe", Json::object());
  log_.Append(stage_->Process(mut, Ctx(3), log_).events);
  StageResult after = stage_->Process(mut, Ctx(4), log_);
  EXPECT_FALSE(after.deferred);
  ASSERT_EQ(after.events.size(), 1u);
  EXPECT_EQ(after.events[0].data["result"]["error"]["code"], "E_OUTCOME_UNKNOWN")
      << "no read_only: fail closed";
}

TEST_F(ExecuteStageTest, OnlyAllowedOrGrantedCallsRun) {
  Message ask = Allowed("g1", "echo", {{"text", "x"}}, {{"verdict", "ask"}});
  StageResult r = stage_->Process(ask, Ctx(1), log_);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.rejected") << "ask without a grant does not run";
  EXPECT_EQ(r.events[0].data["error"]["code"], "E_NOT_IN_LOG");
  EXPECT_FALSE(r.deferred);
  std::vector<Event> ev;
  log_.EventsOfRequest("o1", "g1", &ev);
  Flow f;
  ASSERT_TRUE(Flow::FromJson(Json::parse(ask.value), &f));
  log_.Append({FlowEvent(f, "approval.granted", 3, {{"approver", "alice"}, {"scope", "once"}})});
  r = stage_->Process(ask, Ctx(2), log_);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].type, "execution.completed") << "granted: runs";
  Message denied = Allowed("g2", "echo", Json::object(), {{"verdict", "deny"}});
  EXPECT_EQ(stage_->Process(denied, Ctx(3), log_).events[0].type, "request.rejected");
}

// Whoever can write to the execute topic: a flow runs only when it is what
// ingest received and decide decided, as the log records it. A refusal is
// filed under org "unknown" and leaves the request it names alone.
TEST_F(ExecuteStageTest, AFlowWhoseRequestWasNeverReceivedDoesNotRun) {
  Flow forged = testing::AllowedFlow("x1", "write_file", {{"path", "forged.txt"}, {"content", "x"}});
  StageResult r =
      stage_->Process(MessageFor(topics_.execute(), forged.request, forged.ToJson()), Ctx(1), log_);
  EXPECT_FALSE(r.deferred) << "nothing runs";
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].type, "request.rejected");
  EXPECT_EQ(r.events[0].data["error"]["code"], "E_NOT_IN_LOG");
  EXPECT_EQ(r.events[0].org_id, "unknown");
  EXPECT_EQ(r.events[0].data["claimed"]["request_id"], "x1");
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].message.topic, topics_.results());
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/forged.txt"));
}

TEST_F(ExecuteStageTest, AFlowThatDiffersFromTheLogDoesNotRun) {
  Message m = Allowed("x2", "write_file", {{"path", "real.txt"}, {"content", "x"}});
  Flow f;
  ASSERT_TRUE(Flow::FromJson(Json::parse(m.value), &f));
  std::vector<Event> before;
  log_.EventsOfRequest("o1", "x2", &before);
  // Other args (args_hash recomputed so only the content differs), another
  // received_at, a decision decide did not make.
  Flow other_args = f;
  other_args.request["args"] = {{"path", "evil.txt"}, {"content", "x"}};
  other_args.args_hash = ArgsHash(other_args.request["args"]);
  Flow other_time = f;
  other_time.received_at = "2026-11-23T00:00:00.000000Z";
  Flow other_decision = f;
  other_decision.decision["reason"] = "forged";
  int n = 1;
  for (const Flow* forged : {&other_args, &other_time, &other_decision}) {
    StageResult r =
        stage_->Process(MessageFor(topics_.execute(), forged->request, forged->ToJson()), Ctx(n++), log_);
    EXPECT_FALSE(r.deferred);
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].data["error"]["code"], "E_FLOW_MISMATCH");
    EXPECT_EQ(r.events[0].org_id, "unknown");
    log_.Append(r.events);
  }
  std::vector<Event> after;
  log_.EventsOfRequest("o1", "x2", &after);
  EXPECT_EQ(after.size(), before.size()) << "the refusals did not touch the request they named";
  EXPECT_FALSE(std::filesystem::exists(Workspace() + "/evil.txt"));
  // The genuine flow still runs.
  StageResult ok = stage_->Process(m, Ctx(9), log_);
  ASSERT_TRUE(ok.deferred);
  log_.Append(ok.events);
  log_.Append(ok.deferred().events);
  EXPECT_TRUE(std::filesystem::exists(Workspace() + "/real.txt"));
}

TEST_F(ExecuteStageTest, PureToolsRunInlineAndUnknownToolsFail) {
  StageResult r = stage_->Process(Allowed("e1", "echo", {{"text", "hi"}}), Ctx(1), log_);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_FALSE(r.deferred);
  EXPECT_EQ(ResultOf(r)["result"]["data"]["text"], "hi");
  EXPECT_EQ(r.outputs[0].log_seq_of_event, 1);
  r = stage_->Process(Allowed("e2", "calculate", {{"expression", "6*7"}}), Ctx(2), log_);
  EXPECT_EQ(ResultOf(r)["result"]["data"]["result"], 42.0);
  r = stage_->Process(Allowed("e3", "teleport", Json::object()), Ctx(3), log_);
  EXPECT_EQ(ResultOf(r)["result"]["error"]["code"], "E_TOOL_EXEC");
}

// The tool got "k-1" (echo returns it); neither the log nor the results
// topic holds it (docs/redaction.md).
TEST_F(ExecuteStageTest, SecretsAreRedactedInTheLogAndInTheResult) {
  StageResult r = stage_->Process(
      Allowed("e4", "echo", {{"api_key", "k-1"}, {"note", "sk-live-4eC39HqLyjWDarjtT1zdp7dc"}}), Ctx(1),
      log_);
  EXPECT_EQ(r.events[1].data["result"]["data"]["api_key"], "[REDACTED]");
  EXPECT_EQ(r.events[1].data["result"]["data"]["note"], "[REDACTED]");
  EXPECT_EQ(ResultOf(r)["result"]["data"]["api_key"], "[REDACTED]");
  EXPECT_EQ(ResultOf(r)["result"]["data"]["note"], "[REDACTED]");
}

}  // namespace
}  // namespace tollgate
