#include "execute/execute_stage.h"

#include <unistd.h>

#include <chrono>
#include <iostream>

#include "core/log.h"
#include "core/redact.h"
#include "core/sha256.h"
#include "core/tool_kind.h"
#include "execute/invocation_check.h"
#include "execute/sandbox.h"

namespace tollgate {
namespace {

// RunsInline (pure and fast: run inside Process, no deferred work): the tool catalog.

// Releases a request's in-flight mark when the deferred work that holds it
// is destroyed: after its result is durable, or if the runner drops it.
struct InFlightToken {
  std::function<void()> release;
  ~InFlightToken() {
    if (release) release();
  }
};

}  // namespace

ExecuteConfig WithPolicy(ExecuteConfig c) {
  if (!c.policy) c.policy = std::make_shared<ExecutePolicy>(DefaultExecutePolicy("tollgate-data"));
  return c;
}

ExecuteStage::ExecuteStage(ExecuteConfig config)
    : config_(WithPolicy(std::move(config))), registry_(config_.policy->tools_dir) {
  registry_.RegisterBuiltins();
  registry_.Reload();
  upstreams_->Configure(*config_.policy);
  registry_.SetUpstreams(upstreams_);
  // A previous process died (kill -9) while tools ran: end what they left.
  if (!config_.policy->run_dir.empty()) KillLeftovers(config_.policy->run_dir);
}

std::shared_ptr<const ExecutePolicy> ExecuteStage::policy() const {
  std::lock_guard<std::mutex> lock(policy_mu_);
  return config_.policy;
}

std::shared_ptr<const Redactor> ExecuteStage::redactor() const {
  return config_.redactor ? config_.redactor->get() : DefaultRedactor();
}

void ExecuteStage::OnAppended(const std::vector<Event>& events) {
  for (const Event& e : events) {
    if (e.type != ev::kToolsAvailable) continue;
    std::lock_guard<std::mutex> lock(announced_mu_);
    if (e.data.value("executor", "") != executor_id_) continue;
    announced_.clear();
    for (const auto& n : e.data.value("cli", Json::array())) {
      if (n.is_string()) announced_.push_back(n.get<std::string>());
    }
    announced_any_ = true;
  }
  if (!config_.policy_from_doc) return;
  for (const Event& e : events) {
    if (e.type != ev::kPolicyUpdated || !e.data.is_object() || e.data.value("tier", "file") != "file")
      continue;
    auto next = std::make_shared<ExecutePolicy>();
    Status s = config_.policy_from_doc(e.data.value("policy", Json::object()), next.get());
    if (!s.ok()) {
      // Decide refuses such a file before logging it (DecideConfig::validate);
      // one that got in anyway must not leave the old rules running quietly.
      log::Error({"execute"}) << "policy.updated at seq " << e.seq << " not applied: " << s.ToString()
                              << "\n";
      continue;
    }
    upstreams_->Configure(*next);
    std::lock_guard<std::mutex> lock(policy_mu_);
    config_.policy = std::move(next);
  }
}

Json ExecuteStage::RunTool(const Json& request, const ResolvedCall& call, const Json& decision,
                           int64_t now_us, std::shared_ptr<const ExecutePolicy> pol) const {
  if (!pol) pol = policy();
  const std::string& name = call.tool;
  auto tool = registry_.FindFor(name, request.value("org_id", ""), request.value("agent_id", ""), *pol);
  auto t0 = std::chrono::steady_clock::now();
  Json result;
  if (!tool) {
    result = ToolResultError(errc::kToolExec, "no tool '" + name + "' in this executor's registry", false);
  } else {
    ToolContext tc;
    tc.org_id = request.value("org_id", "");
    tc.agent_id = request.value("agent_id", "");
    tc.session_id = request.value("session_id", "");
    tc.request_id = request.value("request_id", "");
    tc.now_us = now_us;
    tc.policy = pol.get();  // held by `pol` until the tool returns
    tc.decision = decision;
    tc.audit = config_.audit;
    tc.alias = call.alias.get();
    tc.registry = &registry_;
    try {
      result = tool->Run(call.args, tc);
    } catch (const std::exception& e) {
      result = ToolResultError(errc::kToolExec, std::string("the tool failed: ") + e.what(), false);
    }
  }
  if (!result.is_object() || !result.contains("success")) {
    result = ToolResultError(errc::kToolExec, "the tool returned no ToolResult", false);
  }
  if (!result["meta"].is_object()) result["meta"] = Json::object();
  // The seed's meta.sandbox: false unless the tool said it ran in the
  // sandbox; a tool's meta.command is its own.
  if (!result["meta"].contains("sandbox") || !result["meta"]["sandbox"].is_boolean())
    result["meta"]["sandbox"] = false;
  result["meta"]["duration_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

namespace {

// execution.completed for `tool_result`, and the agent's result.
void Complete(const Flow& flow, const Json& decision, const Json& approval, const Json& tool_result,
              const std::string& source, int64_t time_us, const std::string& results_topic,
              const Redactor& redactor, StageResult* r) {
  Json logged = tool_result;
  auto redacted = redactor.Redact(logged);
  double cost = 0;
  auto m = tool_result.find("meta");
  if (m != tool_result.end() && m->is_object() && m->contains("cost_usd") && (*m)["cost_usd"].is_number() &&
      (*m)["cost_usd"].get<double>() >= 0) {
    cost = (*m)["cost_usd"].get<double>();
  }
  const double ms = tool_result["meta"].value("duration_ms", 0.0);
  r->events.push_back(FlowEvent(flow, ev::kExecutionCompleted, time_us,
                                {{"result", logged},
                                 {"duration_ms", ms},
                                 {"cost_usd", cost},
                                 {"redacted", redacted},
                                 {"source", source}}));
  const bool ok = tool_result.value("success", false);
  Json result = MakeResult(flow.request, ok ? "completed" : "failed", decision, approval, logged);
  RedactResult(&result, redactor);  // the decision's fields; the ToolResult is `logged` already
  r->outputs.push_back(
      {MessageFor(results_topic, flow.request, result), static_cast<int>(r->events.size()) - 1, result});
}

}  // namespace

namespace {

// The ToolResult of a call that started and never completed (a crash, a
// kill): it may have run, and it may be what stopped the process, so it is
// never run again (docs/tools.md, "How a call runs").
Json InterruptedResult(const RequestState& state, bool read_only) {
  const std::string when = "execution started (attempt " + std::to_string(state.attempts) + " at " +
                           FormatTime(state.started->time_us) + ")";
  return read_only ? ToolResultError(errc::kExecutionInterrupted,
                                     when +
                                         " but the process stopped while this call was running, so it was "
                                         "not run again (it may be what stopped it); the agent may retry it "
                                         "as a new request",
                                     true)
                   : ToolResultError(errc::kOutcomeUnknown,
                                     when +
                                         " but its outcome was not recorded; the tool is not read-only, so "
                                         "it was not run again: check its effect before retrying with a new "
                                         "request_id",
                                     false);
}

// Which kind of executor runs `tool_name` (execution.started's data.executor).
std::string ExecutorOf(const std::string& tool_name) {
  return IsCliTool(tool_name) ? "cli" : IsMcpTool(tool_name) ? "mcp" : "builtin";
}

}  // namespace

void ExecuteStage::ResendCompleted(const Flow& flow, const RequestState& state, const Json& approval,
                                   StageResult* r) const {
  Json result = MakeResult(flow.request,
                           state.completed->data["result"].value("success", false) ? "completed" : "failed",
                           flow.decision, approval, state.completed->data["result"]);
  result["log_seq"] = state.completed->seq;
  RedactResult(&result, *redactor());
  // value_json too: on the events topic the runner resets log_seq to 0,
  // so this copy has the first one's bytes and is not sent twice.
  r->outputs.push_back({MessageFor(config_.topics.results(), flow.request, result), -1, result});
}

void ExecuteStage::Defer(const Flow& flow, const ResolvedCall& call, const Json& decision,
                         const Json& approval, const StageContext& ctx,
                         std::shared_ptr<const ExecutePolicy> pol, const std::string& rid, StageResult* r) {
  {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    in_flight_->ids.insert(rid);
  }
  auto token = std::make_shared<InFlightToken>();
  token->release = [inflight = in_flight_, rid] {
    std::lock_guard<std::mutex> lock(inflight->mu);
    inflight->ids.erase(rid);
  };
  const std::string source = ctx.source;
  const int64_t now = ctx.now_us;
  const std::string results = config_.topics.results();
  r->deferred = [this, flow, call, decision, approval, source, now, results, token, pol] {
    Json tr = RunTool(flow.request, call, decision, now, pol);
    StageResult done;
    Complete(flow, flow.decision, approval, tr, source, NowMicros(), results, *redactor(), &done);
    return done;
  };
}

StageResult ExecuteStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  FlowInput input;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &input, &r)) return r;
  const Flow& flow = input.flow;
  const RequestState& state = input.state;
  if (flow.decision.is_null() || !state.cleared()) {
    // Only what decide allowed, or what approvers granted, as the log records it, runs.
    return RejectMalformedFlow(
        name(), config_.topics, in, ctx,
        "request " + flow.request_id() + " has no allow decision or granted approval in the log",
        errc::kNotInLog,
        Json{{"request_id", flow.request_id()}, {"org_id", flow.request.value("org_id", "")}});
  }
  const Json approval = ApprovalOf(state);  // null unless approvers cleared it
  if (state.completed != nullptr) {
    if (SourceOf(state.completed) != ctx.source) return r;  // a re-sent copy: ran once already
    ResendCompleted(flow, state, approval, &r);
    return r;
  }
  const std::string rid = RequestKey(flow.request.value("org_id", ""), flow.request_id());
  {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    if (in_flight_->ids.count(rid)) return r;  // its work is running here and will answer
  }
  const std::string tool_name = flow.request.value("tool", "");
  // The policy in force now, for this call to its end (a live edit applies
  // to later calls).
  std::shared_ptr<const ExecutePolicy> pol = policy();
  const ResolvedCall call = ResolveCall(flow.request, *pol);
  auto tool = registry_.FindFor(call.tool, flow.request.value("org_id", ""),
                                flow.request.value("agent_id", ""), *pol);
  // The flow's decision: ReadFlow checked it is the log's, and unlike the
  // log's copy its request-derived fields are not redacted.
  Json decision = DecisionFromLog(flow.decision);
  const bool read_only = tool && tool->ReadOnly(call.args, decision);
  // Ends the request here with `tool_result` (execution.completed and its result).
  auto complete = [&](const Json& tool_result) {
    Complete(flow, flow.decision, approval, tool_result, ctx.source, ctx.now_us, config_.topics.results(),
             *redactor(), &r);
    return std::move(r);
  };
  // An alias's arguments that do not expand: nothing runs.
  if (!call.error.is_null()) return complete(call.error);
  // What executes is what was decided (execute/invocation_check.h).
  if (Json mismatch = CheckDecidedInvocation(flow.request, call, flow.decision, *pol); !mismatch.is_null()) {
    return complete(mismatch);
  }
  if (state.started != nullptr) return complete(InterruptedResult(state, read_only));
  const int attempt = state.attempts + 1;
  r.events.push_back(
      FlowEvent(flow, ev::kExecutionStarted, ctx.now_us,
                {{"executor", ExecutorOf(tool_name)}, {"attempt", attempt}, {"source", ctx.source}},
                std::to_string(attempt)));
  if (!tool || RunsInline(call.tool)) return complete(RunTool(flow.request, call, decision, ctx.now_us, pol));
  Defer(flow, call, decision, approval, ctx, std::move(pol), rid, &r);
  return r;
}

StageResult ExecuteStage::Tick(const StageContext& ctx, const LogView&) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_reload_ >= config_.reload_interval || !operator_cli_known_) {
    last_reload_ = now;
    registry_.Reload();
    operator_cli_ = registry_.OperatorCliNames(*policy());
    operator_cli_known_ = true;
  }
  // Tell decide which CLI tools this executor has (docs/tools.md, "CLI
  // tools"), until the log says so: a cli:NAME no executor has is then
  // denied at decide instead of being sent to approvers first. The id is
  // the content's, so a repeat appends nothing.
  StageResult r;
  const std::vector<std::string>& names = operator_cli_;
  std::lock_guard<std::mutex> lock(announced_mu_);
  if (executor_id_.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    executor_id_ = std::string(host[0] ? host : "localhost") + ":" + registry_.tools_dir();
  }
  if (announced_any_ && names == announced_) return r;
  Event e;
  e.type = ev::kToolsAvailable;
  e.org_id = kAllOrgs;
  e.time_us = ctx.now_us;
  e.data = {{"executor", executor_id_}, {"cli", names}};
  std::string bytes;
  (void)CanonicalBytes(e.data, &bytes);
  e.id = MakeEventId(e.type, "", Sha256Hex(bytes).substr(0, 32));
  r.events.push_back(std::move(e));
  return r;
}

}  // namespace tollgate
