#include "decide/decide_state.h"

#include <algorithm>

namespace tollgate {

void DecideState::Saw(const Event& e) {
  if (e.seq > max_seq_) {
    max_seq_ = e.seq;
    max_seq_id_ = e.id;
  }
}

Status DecideState::Apply(const Event& e) {
  Saw(e);
  if (e.type == ev::kToolsAvailable) {
    const std::string executor = e.data.value("executor", "");
    auto cli = e.data.find("cli");
    if (executor.empty() || cli == e.data.end() || !cli->is_array()) return Status::Ok();
    std::set<std::string>& names = executors_.cli[executor];
    names.clear();
    for (const auto& n : *cli) {
      if (n.is_string()) names.insert(n.get<std::string>());
    }
    return Status::Ok();
  }
  if (e.type == ev::kExecutionCompleted && e.tool == "reload_tools") {
    const Json& r = e.data.contains("result") ? e.data["result"] : Json();
    if (r.is_object() && r.value("success", false) && r.contains("data") && r["data"].is_object()) {
      executors_.ApplyReload(e.org_id, e.agent_id, r["data"].value("tools", Json::array()));
    }
  }
  if (e.type != ev::kPolicyUpdated) {
    ledger_.Apply(e);
    facts_.Apply(labels_from_ != nullptr ? *labels_from_ : policy_, e);
    return Status::Ok();
  }
  Status s = policy_.Apply(e);
  if (s.ok() && e.data.value("tier", "") == "agent_local") {
    Json rule = e.data;
    if (!rule.contains("org_id")) rule["org_id"] = e.org_id;
    if (!rule.contains("agent_id")) rule["agent_id"] = e.agent_id;
    // Kept once per content hash, as PolicyInForce applies it once.
    const std::string h = rule.value("content_hash", "");
    bool seen = false;
    for (const auto& r : local_rules_) seen = seen || r.value("content_hash", "") == h;
    if (!seen) local_rules_.push_back(std::move(rule));
  }
  return s;
}

void DecideState::ApplyDecisionMade(const Event& envelope, const Decision& d) {
  Saw(envelope);
  // As BudgetLedger::Apply does for a decision.made.
  if (envelope.seq > ledger_.applied_seq()) ledger_.set_applied_seq(envelope.seq);
  if (envelope.request_id.empty()) return;
  facts_.ApplyDecision(envelope.org_id, envelope.request_id, envelope.session_id, d.verdict, d.invocation,
                       d.subject, envelope.seq);
  if (envelope.seq != 0 && envelope.seq <= ledger_.pruned_seq()) return;  // as BudgetLedger::Apply
  ledger_.ApplyDecision(envelope.request_id, envelope.org_id, envelope.agent_id, envelope.session_id,
                        envelope.tool, d, envelope.seq);
}

void DecideState::ApplyDecision(const std::string& request_id, const Json& request, const Json& decision) {
  ledger_.ApplyDecision(request_id, request, decision);
  facts_.ApplyDecision(request.value("org_id", ""), request_id, request.value("session_id", ""),
                       decision.value("verdict", ""), decision.value("invocation", ""),
                       decision.value("subject", ""), 0);
}

void DecideState::SetFilePolicy(PolicyPtr policy) { policy_.SetFile(std::move(policy)); }

Status DecideState::AddLocalRule(const Json& rule) {
  std::vector<std::string> allow, revoke;
  for (const auto& [key, out] : {std::pair{"allow", &allow}, std::pair{"revoke", &revoke}}) {
    for (const auto& a : rule.value(key, Json::array())) {
      if (!a.is_string())
        return Status::Error(errc::kLogCorrupt,
                             std::string("an agent-local rule's ") + key + " is not a list of strings");
      out->push_back(a.get<std::string>());
    }
  }
  Status s = policy_.AddAgentLocal(rule.value("org_id", ""), rule.value("agent_id", ""), allow,
                                   rule.value("content_hash", ""), revoke);
  if (s.ok()) local_rules_.push_back(rule);
  return s;
}

size_t DecideState::Prune() {
  pruned_at_seq_ = max_seq_;
  return ledger_.Prune(max_seq_ > kRefoldMargin ? max_seq_ - kRefoldMargin : 0);
}

void DecideState::MaybePrune() {
  const uint64_t every = std::max<uint64_t>(1000, ledger_.size() / 2);
  if (max_seq_ >= pruned_at_seq_ + every) Prune();
}

void DecideState::CoverTo(uint64_t head_seq, const std::string& head_id) {
  ledger_.set_applied_seq(std::max(ledger_.applied_seq(), head_seq));
  if (head_seq > max_seq_) {
    max_seq_ = head_seq;
    max_seq_id_ = head_id;
  }
}

}  // namespace tollgate
