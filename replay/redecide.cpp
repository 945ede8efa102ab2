#include "replay/redecide.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "replay/canonical_scan.h"

namespace tollgate::replay {

const char* const kComparedFields[] = {"verdict",      "reason",    "rule",        "danger_level",
                                       "policy_version", "error_code", "reservation", "approval",
                                       "invocation",   "read_only", "notify",      nullptr};

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

struct Received {
  Json request;
  int64_t received_us = 0;
};

}  // namespace

RedecideReport Redecide(std::vector<Event> events, const Target& target, const RedecideOptions& options) {
  std::vector<DecisionInput> inputs;
  inputs.reserve(events.size());
  for (Event& e : events) inputs.push_back({std::move(e), {}});
  return Redecide(std::move(inputs), target, options);
}

RedecideReport Redecide(std::vector<DecisionInput> inputs, const Target& target, const RedecideOptions& options) {
  auto by_seq = [](const DecisionInput& a, const DecisionInput& b) { return a.event.seq < b.event.seq; };
  if (!std::is_sorted(inputs.begin(), inputs.end(), by_seq)) std::stable_sort(inputs.begin(), inputs.end(), by_seq);
  RedecideReport report;
  report.what_if = options.candidate != nullptr;
  if (report.what_if) report.candidate_version = options.candidate->version();
  PolicyInForce logged;   // what the log says was in force
  PolicyInForce what_if;  // the candidate plus the log's agent-local rules
  if (report.what_if) what_if.SetFile(options.candidate);
  BudgetLedger ledger;
  std::unordered_map<std::string, Received> received;     // target requests not yet decided
  std::unordered_set<std::string> targets;                // every target request
  std::unordered_map<std::string, std::string> verdicts;  // target request -> re-decided verdict (what-if)
  std::unordered_map<std::string, double> cost;           // target request -> actual cost, once completed
  std::vector<std::pair<size_t, bool>> pending;           // (index, in changes?) to fill executed/cost
  uint64_t last_policy_seq = 0;
  std::string policy_error;

  Decision decision;  // reused: DecideInto keeps the hot path free of allocation
  std::string redecided_bytes, recorded_bytes;
  for (DecisionInput& input : inputs) {  // owned: request and decision data are moved out
    Event& e = input.event;
    // A decision's data kept as canonical bytes is parsed only when needed
    // (ReadDecisionInputs validated it: parsing cannot fail).
    auto parse_data = [&] {
      if (input.data_bytes.empty()) return;
      Status ps = ParseJson(input.data_bytes, &e.data);
      if (!ps.ok()) e.data = Json::object();  // unreachable: the bytes were validated
      input.data_bytes.clear();
    };
    ++report.events;
    if (e.type == "policy.updated") {
      Status s = logged.Apply(e);
      if (s.ok() && report.what_if && e.data.value("tier", "") == "agent_local") s = what_if.Apply(e);
      if (!s.ok()) policy_error = "the policy.updated at seq " + std::to_string(e.seq) + " does not load: " + s.ToString();
      else policy_error.clear();
      last_policy_seq = e.seq;
      continue;
    }
    const bool is_target = target.Matches(e.session_id, e.agent_id, e.time_us);
    if (e.type == "request.received") {
      if (!is_target) continue;
      Received r;
      if (!ParseTime(e.data.value("received_at", ""), &r.received_us)) r.received_us = e.time_us;
      auto req = e.data.find("request");
      r.request = req != e.data.end() ? std::move(*req) : Json::object();
      targets.insert(e.request_id);
      received[e.request_id] = std::move(r);
      continue;
    }
    if (e.type != "decision.made") {
      if (e.type == "execution.completed" && targets.count(e.request_id)) {
        cost[e.request_id] = e.data.value("cost_usd", 0.0);
      }
      ledger.Apply(e);
      continue;
    }
    auto rit = received.find(e.request_id);
    if (!is_target && rit == received.end()) {
      parse_data();
      ledger.Apply(e);  // another request of the org: budget state only
      continue;
    }
    DecisionChange c;
    c.seq = e.seq;
    c.request_id = e.request_id;
    c.session_id = e.session_id;
    c.agent_id = e.agent_id;
    c.tool = e.tool;
    const PolicyInForce& policy = report.what_if ? what_if : logged;
    if (rit == received.end()) {
      c.note = "its request.received is not in the range read";
    } else if (!policy.has_policy()) {
      c.note = last_policy_seq == 0 ? "no policy.updated with a policy precedes it in the log"
                                    : "the policy in force does not load: " + policy_error;
    }
    if (!c.note.empty()) {
      parse_data();
      ledger.Apply(e);
      c.recorded = Compared(std::move(e.data));
      report.not_redecided.push_back(std::move(c));
      pending.emplace_back(report.not_redecided.size() - 1, false);
      continue;
    }
    c.received_us = rit->second.received_us;
    DecideInput in;
    in.request = &rit->second.request;
    in.received_at_us = rit->second.received_us;
    DecideInto(policy, ledger, in, &decision);
    decision.checks.clear();  // explanation, not compared: not worth serialising
    ++report.decisions;
    RedecideReport::PerSession& per_session = report.sessions[e.session_id];
    ++per_session.decisions;
    c.redecided = Compared(decision.ToJson());
    // Fast path: the recorded decision kept as canonical bytes, its compared
    // fields byte-identical to the re-made decision's canonical bytes. Then
    // the two compare equal field by field (canonical JSON is one text per
    // value) and the recorded one need not be parsed. Any other case, the
    // recorded decision is parsed and compared field by field.
    bool same = false;
    if (!input.data_bytes.empty()) {
      same = CanonicalSubset(input.data_bytes, kComparedFields, &recorded_bytes) &&
             CanonicalBytes(c.redecided, &redecided_bytes).ok() && recorded_bytes == redecided_bytes;
      if (!same) parse_data();
    }
    // The ledger goes on with the decision that counts in this mode (it
    // reads the compared fields verdict and reservation only).
    if (report.what_if) {
      ledger.ApplyDecision(e.request_id, rit->second.request, c.redecided);
    } else if (same) {
      e.data = std::move(c.redecided);  // the recorded decision's compared fields, as equal
      ledger.Apply(e);
      c.redecided = std::move(e.data);
    } else {
      ledger.Apply(e);
    }
    received.erase(rit);  // its decision is made; the request is not needed again
    if (same) {
      const std::string v = c.redecided.value("verdict", "");
      const double reserved = ReservedUsd(c.redecided);
      const bool budget_denial = BudgetDenial(c.redecided);
      report.reserved_recorded_usd += reserved;
      report.reserved_redecided_usd += reserved;
      report.budget_denials_recorded += budget_denial;
      report.budget_denials_redecided += budget_denial;
      verdicts[e.request_id] = v;
      continue;
    }
    c.recorded = Compared(std::move(e.data));

    const std::string rv = c.recorded.value("verdict", ""), nv = c.redecided.value("verdict", "");
    report.reserved_recorded_usd += ReservedUsd(c.recorded);
    report.reserved_redecided_usd += ReservedUsd(c.redecided);
    if (rv == "deny" && nv != "deny") report.newly_allowed_reserved_usd += ReservedUsd(c.redecided);
    report.budget_denials_recorded += BudgetDenial(c.recorded);
    report.budget_denials_redecided += BudgetDenial(c.redecided);
    verdicts[e.request_id] = nv;
    for (const char* const* f = kComparedFields; *f != nullptr; ++f) {
      auto a = c.recorded.find(*f), b = c.redecided.find(*f);
      const bool in_a = a != c.recorded.end(), in_b = b != c.redecided.end();
      if (in_a != in_b || (in_a && *a != *b)) c.fields.push_back(*f);
    }
    if (c.fields.empty()) continue;
    if (report.what_if) {
      if (!c.verdict_changed()) {
        ++report.same_verdict_other_rule;
        continue;
      }
    }
    ++report.transitions[c.transition()];
    ++per_session.changes;
    report.changes.push_back(std::move(c));
    pending.emplace_back(report.changes.size() - 1, true);
  }
  for (auto& [rid, usd] : cost) {
    report.spend_recorded_usd += usd;
    auto v = verdicts.find(rid);
    if (v != verdicts.end() && v->second == "deny") report.spend_avoided_usd += usd;
  }
  for (auto [i, in_changes] : pending) {
    DecisionChange& c = in_changes ? report.changes[i] : report.not_redecided[i];
    auto it = cost.find(c.request_id);
    c.executed = it != cost.end();
    c.cost_usd = c.executed ? it->second : 0;
  }
  return report;
}

namespace {

Json ChangeJson(const DecisionChange& c) {
  Json j{{"seq", c.seq},           {"request_id", c.request_id}, {"session_id", c.session_id},
         {"agent_id", c.agent_id}, {"tool", c.tool},             {"recorded", c.recorded},
         {"redecided", c.redecided}, {"fields", c.fields},       {"executed", c.executed},
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
  }
  for (const auto& c : r.not_redecided) {
    o << "  seq " << c.seq << "  " << c.request_id << "  " << c.tool << "  not re-decided: " << c.note << "\n";
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
  if (r.what_if && r.same_verdict_other_rule) o << "  (" << r.same_verdict_other_rule << " keep their verdict under another rule)";
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
