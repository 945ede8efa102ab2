#include "decide/decide_stage.h"

#include <iostream>

#include "core/log.h"
#include "decide/policy_loader.h"

namespace tollgate {

Event PolicyUpdatedEvent(const Policy& policy, int64_t time_us) {
  Event e;
  e.type = ev::kPolicyUpdated;
  e.id = MakeEventId(e.type, "", "file:" + policy.content_hash());
  e.time_us = time_us;
  e.org_id = kAllOrgs;
  e.data = {{"tier", "file"},
            {"source", policy.source()},
            {"policy", policy.doc()},
            {"content_hash", policy.content_hash()},
            {"policy_version", policy.version()}};
  return e;
}

void DecideStage::Fold(const Event& e) {
  Status s = state_.Apply(e);
  if (!s.ok())
    log::Error({"decide"}) << "policy.updated at seq " << e.seq << " not applied: " << s.ToString() << "\n";
}

void DecideStage::OnAppended(const std::vector<Event>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events) Fold(e);
  state_.MaybePrune();
}

void DecideStage::UsePolicy(PolicyPtr policy) {
  std::lock_guard<std::mutex> lock(mu_);
  state_.SetFilePolicy(std::move(policy));
}

Json DecideStage::PolicyHealth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watch_.Health(state_.policy());
}

PolicyInForce DecideStage::policy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_.policy();
}

BudgetLedger DecideStage::ledger() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_.ledger();
}

std::vector<BudgetShare> DecideStage::BudgetShares(int64_t now_us) const {
  std::lock_guard<std::mutex> lock(mu_);
  return tollgate::BudgetShares(state_.policy(), state_.ledger(), now_us);
}

Status DecideStage::Rebuild(uint64_t head_seq, const ReadEventFn& read, const std::string& snapshot_path,
                            bool* from_snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshots_ = DecideSnapshots(snapshot_path);
  Status s = RebuildDecideState(head_seq, read, snapshot_path, &state_, from_snapshot);
  if (s.ok()) s = snapshots_.Write(state_);
  return s;
}

Status DecideStage::Restore(const LogHistory& history) {
  const uint64_t head = history.head_seq();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (restored_ && restored_head_ == head) return Status::Ok();
  }
  Status s = Rebuild(
      head, [&history](uint64_t seq, Event* e) { return history.ReadEvent(seq, e); }, config_.snapshot_path);
  if (!s.ok()) return s;
  // Fail at start rather than hold every request: with no policy in the
  // log, the file must load now.
  PolicyPtr file_policy;
  Status fs = config_.policy_path.empty() ? Status::Error(errc::kNoPolicy, "no policy file")
                                          : LoadPolicyFile(config_.policy_path, &file_policy);
  const PolicyInForce in_force = policy();
  if (!fs.ok() && !in_force.has_policy()) return fs;
  if (!fs.ok() && !config_.policy_path.empty())
    log::Warn({"decide"}) << fs.message() << "; keeping the policy in force from the log\n";
  if (config_.redactor) {
    std::shared_ptr<const Redactor> r;
    const Json& doc = in_force.has_policy() ? in_force.file()->doc() : file_policy->doc();
    if (Redactor::FromPolicy(doc, &r).ok()) config_.redactor->set(r);
  }
  std::lock_guard<std::mutex> lock(mu_);
  restored_ = true;
  restored_head_ = head;
  return Status::Ok();
}

StageResult DecideStage::Tick(const StageContext& ctx, const LogView&) {
  StageResult r;
  std::lock_guard<std::mutex> lock(mu_);
  snapshots_.MaybeWrite(state_, ctx.now_us);
  watch_.Poll(state_.policy());
  // A refused edit is in the log too, not only on stderr.
  if (auto refused = watch_.TakeRefusedEvent(state_.policy(), ctx.now_us)) r.events.push_back(*refused);
  // Emit until the file's policy is in force: the event id is the content
  // hash, so a repeat (an append that failed, a tick before the listener
  // ran) appends nothing new.
  const PolicyPtr& file = watch_.policy();
  const PolicyInForce& in_force = state_.policy();
  if (file != nullptr &&
      (!in_force.has_policy() || in_force.file()->content_hash() != file->content_hash())) {
    r.events.push_back(PolicyUpdatedEvent(*file, ctx.now_us));
  }
  return r;
}

StageResult DecideStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  FlowInput input;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &input, &r)) return r;
  Flow& flow = input.flow;
  const RequestState& state = input.state;
  // Held for the whole call: a live policy edit may replace the rules.
  const std::shared_ptr<const Redactor> redactor =
      config_.redactor ? config_.redactor->get() : DefaultRedactor();
  Json decision;
  if (state.decision != nullptr) {
    // Decided before. The same message read again after a crash re-emits the
    // recorded decision; any other copy is a duplicate and ends here.
    if (SourceOf(state.decision) != ctx.source) return r;
    decision = DecisionFromLog(state.decision->data);  // its secrets redacted (docs/redaction.md)
  } else {
    // Decisions depend on the request's received_at, never the wall clock.
    int64_t received_at = 0;
    if (!ParseTime(flow.received_at, &received_at)) {
      received_at = state.received != nullptr ? state.received->time_us : 0;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!state_.policy().has_policy()) {
      r.error = Status::Error(
          errc::kNoPolicy,
          "no policy in force yet" + (watch_.error().empty() ? std::string() : ": " + watch_.error()));
      return r;
    }
    DecideInput decide_input{&flow.request, received_at, &state_.executors()};
    decide_input.facts = &state_.facts();
    decision = Decide(state_.policy(), state_.ledger(), decide_input);
    // Before the ledger sees it: an oversize invocation is a deny, and
    // holds no budget (core/messages.h, BoundDecision).
    BoundDecision(&decision);
    Json logged = LoggedDecision(decision, *redactor);
    logged["source"] = ctx.source;
    r.events.push_back(FlowEvent(flow, ev::kDecisionMade, ctx.now_us, std::move(logged)));
    // The fold sees the event it will see again once appended (idempotent).
    Fold(r.events.back());
  }
  flow.decision = decision;
  if (decision["verdict"] == "allow") {
    r.outputs.push_back({MessageFor(config_.topics.execute(), flow.request, flow.ToJson()), -1});
  } else if (decision["verdict"] == "ask") {
    r.outputs.push_back({MessageFor(config_.topics.approve(), flow.request, flow.ToJson()), -1});
  } else {
    const std::string code = decision.value("error_code", errc::kPolicyDenied);
    Json result = MakeResult(flow.request, "denied", decision, nullptr,
                             ToolResultError(code, decision.value("reason", "denied by policy"), false));
    if (state.decision != nullptr) result["log_seq"] = state.decision->seq;
    RedactResult(&result, *redactor);
    r.outputs.push_back(
        {MessageFor(config_.topics.results(), flow.request, result), r.events.empty() ? -1 : 0, result});
  }
  return r;
}

}  // namespace tollgate
