#include "replay/redecide.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/messages.h"
#include "core/redact.h"
#include "replay/decision_bytes.h"

namespace tollgate::replay {

const char* const kComparedFields[] = {
    "verdict",  "reason",     "rule",      "danger_level", "policy_version", "error_code", "reservation",
    "approval", "invocation", "read_only", "notify",       "history",        nullptr};

bool DecisionChange::verdict_changed() const {
  return !redecided.is_null() && recorded.value("verdict", "") != redecided.value("verdict", "");
}

std::string DecisionChange::transition() const {
  return recorded.value("verdict", "?") + "→" + (redecided.is_null() ? "?" : redecided.value("verdict", "?"));
}

namespace {

// The compared part of a decision, moved out of `d`.
Json Compared(Json&& d) {
  Json out = Json::object();
  for (const char* const* f = kComparedFields; *f != nullptr; ++f) {
    auto it = d.find(*f);
    if (it != d.end()) out[*f] = std::move(*it);
  }
  return out;
}

double ReservedUsd(const Json& d) {
  auto r = d.find("reservation");
  if (r == d.end() || !r->is_object()) return 0;
  auto u = r->find("usd");
  return u != r->end() && u->is_number() ? u->get<double>() : 0;
}

bool BudgetDenial(const Json& d) { return d.value("error_code", "") == errc::kBudgetExceeded; }

// A policy.updated of the file tier: it applies to every org (its envelope
// org is "*").
bool IsFilePolicy(const Event& e) {
  return e.type == ev::kPolicyUpdated && e.data.is_object() && e.data.value("tier", "file") == "file";
}

// A change's identity, from its decision.made.
DecisionChange ChangeOf(const Event& e) {
  DecisionChange c;
  c.seq = e.seq;
  c.org_id = e.org_id;
  c.request_id = e.request_id;
  c.session_id = e.session_id;
  c.agent_id = e.agent_id;
  c.tool = e.tool;
  return c;
}

}  // namespace

struct Redecider::State {
  Target target;
  RedecideReport report;
  // What the log says was in force, and the ledger: decide's own fold
  // (decide/decide_state.h), so replay cannot fold the log otherwise. In
  // what-if mode the ledger is the counterfactual one (see redecide.h).
  DecideState fold;
  PolicyInForce what_if;  // the candidate plus the log's agent-local rules
  // The redaction rules decide logged under: a re-made decision is
  // compared in the form decide logged it (core/redact.h).
  RedactorInForce redactor;
  // A target request: received, then (once) re-decided, then completed.
  struct Request {
    Json request;  // while waiting for its decision
    int64_t received_us = 0;
    bool waiting = false;    // received, its decision not yet folded
    bool denied = false;     // its re-decided verdict is deny
    bool completed = false;  // the log shows its execution completed
    double cost_usd = 0;     // ... at this actual cost
  };
  std::unordered_map<std::string, Request>
      requests;                                  // every target request, by OrgRequestKey(org, request_id)
  std::vector<std::pair<size_t, bool>> pending;  // (index, in changes?) to fill executed/cost
  uint64_t last_policy_seq = 0;
  std::string policy_error;
  Decision decision;  // reused: DecideInto keeps the hot path free of allocation
  std::string key;    // reused: the key of the event's request
  const std::string& KeyOf(const Event& e) {
    key.assign(e.org_id);
    key.push_back('\0');
    key.append(e.request_id);
    return key;
  }
  std::string redecided_bytes;
  std::string session;  // of `per_session`, the last one counted
  RedecideReport::PerSession* per_session = nullptr;

  // Fold's steps, by the type of the event.
  void FoldPolicyUpdated(Event& e);
  void FoldTargetReceived(Event& e);
  void FoldOther(DecisionInput& input);
  void FoldDecision(DecisionInput& input, bool is_target);
  void NotRedecided(DecisionInput& input, std::string note);
  void Redecide(DecisionInput& input, Request& r, const PolicyInForce& policy);
  void FoldSameDecision(Event& e, Request& r);
  void RecordChange(DecisionInput& input, Request& r);
  void CatchUpHistory(const DecisionInput& input);
  // A what-if's re-made decision as the session facts keep it (with its
  // subject, which the compared fields lack).
  void FoldWhatIfCall(const Event& e, const Decision& d) {
    fold.mutable_facts().ApplyDecision(e.org_id, e.request_id, e.session_id, d.verdict, d.invocation,
                                       d.subject, e.seq);
  }
};

Redecider::Redecider(const Target& target, const RedecideOptions& options) : s_(std::make_unique<State>()) {
  s_->target = target;
  s_->report.what_if = options.candidate != nullptr;
  // Each session's history waits until its next decision says how much of
  // it decide had folded (decide/session_facts.h).
  s_->fold.mutable_facts().set_deferred(true);
  if (s_->report.what_if) {
    s_->fold.set_labels_from(&s_->what_if);  // the candidate's labels and patterns
    s_->fold.mutable_facts().set_counterfactual(true);
  }
  if (s_->report.what_if) {
    s_->report.candidate_version = options.candidate->version();
    s_->what_if.SetFile(options.candidate);
  }
}

Redecider::~Redecider() = default;

const DecideState& Redecider::state() const { return s_->fold; }

namespace {

// A decision kept as the bytes of its compared fields is parsed only when
// needed (ReadDecisionInputs validated them: parsing cannot fail). What
// the fold reads of a decision are its compared fields.
void ParseData(DecisionInput& input) {
  if (input.compared_bytes.empty()) return;
  Status ps = ParseJson(input.compared_bytes, &input.event.data);
  if (!ps.ok()) input.event.data = Json::object();  // unreachable: the bytes were validated
  input.compared_bytes.clear();
}

// The request is not needed again once decided: its tree goes with the
// input, freed where the input's memory is.
template <typename Request>
void DoneWithRequest(Request& r, Event& e) {
  r.waiting = false;
  e.data = std::move(r.request);
  r.request = Json();
}

}  // namespace

// A policy.updated: the policy in force (and, in what-if mode, the
// candidate's agent-local rules), and whether it loads.
void Redecider::State::FoldPolicyUpdated(Event& e) {
  Status s = fold.Apply(e);
  redactor.OnAppended({e});
  if (s.ok() && report.what_if && e.data.value("tier", "") == "agent_local") s = what_if.Apply(e);
  if (!s.ok())
    policy_error = "the policy.updated at seq " + std::to_string(e.seq) + " does not load: " + s.ToString();
  else
    policy_error.clear();
  last_policy_seq = e.seq;
}

// A target's request.received: kept until its decision.
void Redecider::State::FoldTargetReceived(Event& e) {
  State::Request& r = requests[KeyOf(e)];
  if (!ParseTime(e.data.value("received_at", ""), &r.received_us)) r.received_us = e.time_us;
  auto req = e.data.find("request");
  r.request = req != e.data.end() ? std::move(*req) : Json::object();
  r.waiting = true;
}

// Any other event but a decision: decide's fold (and a target's completion).
void Redecider::State::FoldOther(DecisionInput& input) {
  Event& e = input.event;
  if (e.type == ev::kExecutionCompleted) {
    auto it = requests.find(KeyOf(e));
    if (it != requests.end()) {
      it->second.completed = true;
      it->second.cost_usd = e.data.value("cost_usd", 0.0);
    }
    if (e.tool == "reload_tools") ParseData(input);  // the agent's tool set then (ExecutorTools::ApplyReload)
  }
  fold.Apply(e);
}

// The session's history up to what the decision recorded decide had
// folded (history.upto), or all of it before the decision when it
// recorded none.
void Redecider::State::CatchUpHistory(const DecisionInput& input) {
  const Event& e = input.event;
  uint64_t upto = e.seq > 0 ? e.seq - 1 : 0;
  if (!input.compared_bytes.empty()) {
    HistoryUpto(input.compared_bytes, &upto);
  } else if (auto h = e.data.find("history"); h != e.data.end() && h->is_object()) {
    upto = h->value("upto", upto);
  }
  fold.mutable_facts().CatchUp(e.org_id, e.session_id, upto);
}

// A target decision that cannot be re-made: why, and what was recorded.
void Redecider::State::NotRedecided(DecisionInput& input, std::string note) {
  Event& e = input.event;
  ParseData(input);
  fold.Apply(e);
  DecisionChange c = ChangeOf(e);
  c.note = std::move(note);
  c.recorded = Compared(std::move(e.data));
  report.not_redecided.push_back(std::move(c));
  pending.emplace_back(report.not_redecided.size() - 1, false);
}

// A decision.made: re-made when it is a target's (or its request waits).
void Redecider::State::FoldDecision(DecisionInput& input, bool is_target) {
  Event& e = input.event;
  auto rit = requests.find(KeyOf(e));
  const bool waiting = rit != requests.end() && rit->second.waiting;
  if (!is_target && !waiting) {
    ParseData(input);
    CatchUpHistory(input);  // what this decision saw, so the session's queue stays short
    fold.Apply(e);          // another request of the org: budget state only
    return;
  }
  const PolicyInForce& policy = report.what_if ? what_if : fold.policy();
  std::string note;
  if (!waiting) {
    note = "its request.received is not in the range read";
  } else if (!policy.has_policy()) {
    note = last_policy_seq == 0 ? "no policy.updated with a policy precedes it in the log"
                                : "the policy in force does not load: " + policy_error;
  }
  if (!note.empty()) {
    NotRedecided(input, std::move(note));
    return;
  }
  Redecide(input, rit->second, policy);
}

// The decision re-made, counted, and compared with the recorded one.
void Redecider::State::Redecide(DecisionInput& input, Request& r, const PolicyInForce& policy) {
  Event& e = input.event;
  DecideInput in;
  in.request = &r.request;
  in.received_at_us = r.received_us;
  in.executors = &fold.executors();
  CatchUpHistory(input);
  in.facts = &fold.facts();
  Decision& d = decision;
  DecideInto(policy, fold.ledger(), in, &d);
  d.checks.clear();  // explanation, not compared: not worth serialising
  ++report.decisions;
  if (per_session == nullptr || session != e.session_id) {
    per_session = &report.sessions[e.session_id];  // map nodes: the pointer stays valid
    session = e.session_id;
  }
  ++per_session->decisions;
  // Fast path: the recorded decision kept as the canonical bytes of its
  // compared fields, byte-identical to the re-made decision's. Then the two
  // compare equal field by field (canonical JSON is one text per value) and
  // the recorded one need not be parsed. Any other case, the recorded
  // decision is parsed and compared field by field.
  const bool same = !input.compared_bytes.empty() && ComparedDecisionBytes(d, &redecided_bytes) &&
                    redecided_bytes == input.compared_bytes;
  // The ledger goes on with the decision that counts in this mode (it reads
  // the compared fields verdict and reservation only).
  if (same) {
    FoldSameDecision(e, r);
    return;
  }
  RecordChange(input, r);
}

// The fast path's re-made decision, identical to the recorded one.
void Redecider::State::FoldSameDecision(Event& e, Request& r) {
  Decision& d = decision;
  if (report.what_if) {
    fold.ApplyDecision(e.request_id, r.request, Compared(d.ToJson()));
    FoldWhatIfCall(e, d);
  } else {
    fold.ApplyDecisionMade(e, d);  // the recorded decision is the re-made one
  }
  DoneWithRequest(r, e);
  const double reserved = d.has_reservation ? static_cast<double>(d.reserve_micros) / 1e6 : 0;
  const bool budget_denial = d.error_code == errc::kBudgetExceeded;
  report.reserved_recorded_usd += reserved;
  report.reserved_redecided_usd += reserved;
  report.budget_denials_recorded += budget_denial;
  report.budget_denials_redecided += budget_denial;
  r.denied = d.verdict == "deny";
}

// A re-made decision that differs in its bytes: compared field by field,
// and a change recorded when a field differs.
void Redecider::State::RecordChange(DecisionInput& input, Request& r) {
  Event& e = input.event;
  Decision& d = decision;
  DecisionChange c = ChangeOf(e);
  c.received_us = r.received_us;
  Json made = d.ToJson();
  BoundDecision(&made);  // as decide bounds and redacts what it logs
  RedactDecision(made, *redactor.get());
  c.redecided = Compared(std::move(made));
  ParseData(input);
  if (report.what_if) {
    fold.ApplyDecision(e.request_id, r.request, c.redecided);
    FoldWhatIfCall(e, d);
  } else {
    fold.Apply(e);
  }
  c.recorded = Compared(std::move(e.data));
  DoneWithRequest(r, e);

  const std::string rv = c.recorded.value("verdict", ""), nv = c.redecided.value("verdict", "");
  report.reserved_recorded_usd += ReservedUsd(c.recorded);
  report.reserved_redecided_usd += ReservedUsd(c.redecided);
  if (rv == "deny" && nv != "deny") report.newly_allowed_reserved_usd += ReservedUsd(c.redecided);
  report.budget_denials_recorded += BudgetDenial(c.recorded);
  report.budget_denials_redecided += BudgetDenial(c.redecided);
  r.denied = nv == "deny";
  for (const char* const* f = kComparedFields; *f != nullptr; ++f) {
    auto a = c.recorded.find(*f), b = c.redecided.find(*f);
    const bool in_a = a != c.recorded.end(), in_b = b != c.redecided.end();
    if (in_a != in_b || (in_a && *a != *b)) c.fields.push_back(*f);
  }
  if (c.fields.empty()) return;
  if (report.what_if && !c.verdict_changed()) {
    ++report.same_verdict_other_rule;
    return;
  }
  ++report.transitions[c.transition()];
  ++per_session->changes;
  report.changes.push_back(std::move(c));
  pending.emplace_back(report.changes.size() - 1, true);
}

void Redecider::Fold(DecisionInput& input) {
  State& st = *s_;
  RedecideReport& report = st.report;
  Event& e = input.event;
  // A tenant's re-decision folds nothing of another org: its agent-local
  // rules are no part of this org's policy (nor of its version), and
  // counting them would tell the tenant that another org approved
  // something. (The inputs ReadDecisionInputs gives hold none.)
  if (!st.target.org_id.empty() && e.org_id != st.target.org_id && !IsFilePolicy(e) &&
      e.type != ev::kToolsAvailable) {
    return;
  }
  ++report.events;
  if (e.type == ev::kToolsAvailable) {  // what the executors held then, as decide folded it
    (void)st.fold.Apply(e);
    return;
  }
  if (e.type == ev::kPolicyUpdated) {
    st.FoldPolicyUpdated(e);
    return;
  }
  const bool is_target = st.target.Matches(e);
  if (e.type == ev::kRequestReceived) {
    if (is_target) st.FoldTargetReceived(e);
    return;
  }
  if (e.type != ev::kDecisionMade) {
    st.FoldOther(input);
    return;
  }
  st.FoldDecision(input, is_target);
}

RedecideReport Redecider::Finish() {
  State& st = *s_;
  RedecideReport& report = st.report;
  for (const auto& [rid, r] : st.requests) {
    if (!r.completed) continue;
    report.spend_recorded_usd += r.cost_usd;
    if (r.denied) report.spend_avoided_usd += r.cost_usd;
  }
  for (auto [i, in_changes] : st.pending) {
    DecisionChange& c = in_changes ? report.changes[i] : report.not_redecided[i];
    auto it = st.requests.find(OrgRequestKey(c.org_id, c.request_id));
    c.executed = it != st.requests.end() && it->second.completed;
    c.cost_usd = c.executed ? it->second.cost_usd : 0;
  }
  return std::move(report);
}

RedecideReport Redecide(std::vector<Event> events, const Target& target, const RedecideOptions& options) {
  std::vector<DecisionInput> inputs;
  inputs.reserve(events.size());
  for (Event& e : events) inputs.push_back({std::move(e), {}});
  return Redecide(std::move(inputs), target, options);
}

RedecideReport Redecide(std::vector<DecisionInput> inputs, const Target& target,
                        const RedecideOptions& options) {
  auto by_seq = [](const DecisionInput& a, const DecisionInput& b) { return a.event.seq < b.event.seq; };
  if (!std::is_sorted(inputs.begin(), inputs.end(), by_seq))
    std::stable_sort(inputs.begin(), inputs.end(), by_seq);
  Redecider fold(target, options);
  for (DecisionInput& input : inputs) fold.Fold(input);
  return fold.Finish();
}

namespace {

Json ChangeJson(const DecisionChange& c) {
  Json j{{"seq", c.seq},
         {"org_id", c.org_id},
         {"request_id", c.request_id},
         {"session_id", c.session_id},
         {"agent_id", c.agent_id},
         {"tool", c.tool},
         {"recorded", c.recorded},
         {"redecided", c.redecided},
         {"fields", c.fields},
         {"executed", c.executed},
         {"cost_usd", c.cost_usd}};
  if (c.received_us) j["received_at"] = FormatTime(c.received_us);
  if (!c.note.empty()) j["note"] = c.note;
  return j;
}

std::string Usd(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.6g", v);
  return buf;
}

}  // namespace

Json RedecideReport::ToJson() const {
  Json changes_j = Json::array(), not_j = Json::array();
  for (const auto& c : changes) changes_j.push_back(ChangeJson(c));
  for (const auto& c : not_redecided) not_j.push_back(ChangeJson(c));
  Json j{{"mode", what_if ? "what-if" : "verify"},
         {"events", events},
         {"decisions", decisions},
         {"changed", changes.size()},
         {"transitions", transitions},
         {"changes", changes_j},
         {"not_redecided", not_j},
         {"budget",
          {{"spend_recorded_usd", spend_recorded_usd},
           {"spend_avoided_usd", spend_avoided_usd},
           {"reserved_recorded_usd", reserved_recorded_usd},
           {"reserved_redecided_usd", reserved_redecided_usd},
           {"newly_allowed_reserved_usd", newly_allowed_reserved_usd},
           {"budget_denials_recorded", budget_denials_recorded},
           {"budget_denials_redecided", budget_denials_redecided}}}};
  Json per = Json::object();
  for (const auto& [sid, n] : sessions) per[sid] = {{"decisions", n.decisions}, {"changed", n.changes}};
  j["sessions"] = std::move(per);
  if (what_if) {
    j["candidate_version"] = candidate_version;
    j["same_verdict_other_rule"] = same_verdict_other_rule;
  }
  return j;
}

std::string FormatReport(const RedecideReport& r) {
  std::ostringstream o;
  for (const auto& c : r.changes) {
    o << "  seq " << c.seq << "  " << c.request_id << "  " << c.tool << "  " << c.transition();
    if (!r.what_if || c.recorded.value("rule", "") != c.redecided.value("rule", "")) {
      o << "  rule " << c.recorded.value("rule", "") << " → " << c.redecided.value("rule", "");
    }
    if (!r.what_if) {
      o << "  differs in";
      for (const auto& f : c.fields) o << " " << f;
    }
    if (c.executed) o << "  (ran, cost " << Usd(c.cost_usd) << ")";
    o << "\n      now: " << c.redecided.value("reason", "") << "\n";
    // A history rule: the earlier events that made the call flip.
    if (auto h = c.redecided.find("history"); h != c.redecided.end() && h->contains("rule")) {
      o << "      because of seq";
      for (const auto& q : (*h)["matched"]) o << " " << q.dump();
      o << " (history rule " << (*h)["rule"].get<std::string>() << ")\n";
    }
  }
  for (const auto& c : r.not_redecided) {
    o << "  seq " << c.seq << "  " << c.request_id << "  " << c.tool << "  not re-decided: " << c.note
      << "\n";
  }
  if (r.sessions.size() > 1) {
    for (const auto& [sid, n] : r.sessions) {
      o << "  session " << sid << ": " << n.decisions << " decisions, " << n.changes
        << (r.what_if ? " change verdict\n" : " differ\n");
    }
  }
  o << (r.what_if ? "what-if under " + r.candidate_version : std::string("verify")) << ": " << r.decisions
    << " decisions re-decided, " << r.changes.size() << (r.what_if ? " change verdict" : " differ");
  for (const auto& [t, n] : r.transitions) o << "  " << t << " " << n;
  if (r.what_if && r.same_verdict_other_rule)
    o << "  (" << r.same_verdict_other_rule << " keep their verdict under another rule)";
  if (!r.not_redecided.empty()) o << "; " << r.not_redecided.size() << " could not be re-decided";
  o << "\n";
  if (r.what_if) {
    o << "budget: spent " << Usd(r.spend_recorded_usd) << " on these calls, " << Usd(r.spend_avoided_usd)
      << " of it on calls now denied; reservations " << Usd(r.reserved_recorded_usd) << " → "
      << Usd(r.reserved_redecided_usd) << " (" << Usd(r.newly_allowed_reserved_usd)
      << " for calls denied before); budget denials " << r.budget_denials_recorded << " → "
      << r.budget_denials_redecided << "\n";
  }
  return o.str();
}

}  // namespace tollgate::replay
