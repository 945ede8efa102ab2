// The budget ledger: a fold over the log keyed by request_id
// (decide/policy_engine.h, docs/policy.md "Budgets").
#include <climits>
#include <cmath>
#include <unordered_map>

#include "core/sha256.h"
#include "decide/policy_engine.h"

namespace tollgate {

namespace {
int64_t UsdToMicros(double usd) {
  if (!std::isfinite(usd) || usd < 0) return 0;
  return static_cast<int64_t>(std::llround(usd * 1e6));
}
std::string ScopeKey(BudgetLedger::Scope s, const std::string& org, const std::string& agent,
                     const std::string& session) {
  std::string k(1, static_cast<char>('0' + static_cast<int>(s)));
  k += '\0';
  k += org;
  if (s != BudgetLedger::Scope::kOrg) {
    k += '\0';
    k += agent;
  }
  if (s == BudgetLedger::Scope::kSession) {
    k += '\0';
    k += session;
  }
  return k;
}
}  // namespace

int64_t BudgetEntry::micros() const {
  switch (state) {
    case State::kReserved: return reserved_micros;
    case State::kSettled: return actual_micros;
    case State::kReleased: return 0;
  }
  return 0;
}

struct BudgetLedger::Impl {
  std::unordered_map<std::string, BudgetEntry> entries;  // by request_id; node-based: pointers stay valid
  // scope key -> (at_us -> entry); one map per org, agent and session.
  std::unordered_map<std::string, std::multimap<int64_t, std::pair<const std::string*, const BudgetEntry*>>> by_scope;

  void Index(const std::string& request_id) {
    auto it = entries.find(request_id);
    const BudgetEntry& e = it->second;
    for (Scope s : {Scope::kOrg, Scope::kAgent, Scope::kSession}) {
      by_scope[ScopeKey(s, e.org_id, e.agent_id, e.session_id)].emplace(e.at_us,
                                                                         std::make_pair(&it->first, &e));
    }
  }
  void Reserve(const std::string& request_id, BudgetEntry e) {
    if (request_id.empty() || entries.count(request_id) != 0) return;  // idempotent
    entries.emplace(request_id, std::move(e));
    Index(request_id);
  }
};

BudgetLedger::BudgetLedger() : impl_(std::make_unique<Impl>()) {}
BudgetLedger::~BudgetLedger() = default;
BudgetLedger::BudgetLedger(const BudgetLedger& o) : impl_(std::make_unique<Impl>()), applied_seq_(o.applied_seq_) {
  for (const auto& [id, e] : o.impl_->entries) impl_->Reserve(id, e);
}
BudgetLedger& BudgetLedger::operator=(const BudgetLedger& o) {
  if (this != &o) {
    BudgetLedger copy(o);
    std::swap(impl_, copy.impl_);
    applied_seq_ = o.applied_seq_;
  }
  return *this;
}

void BudgetLedger::ApplyDecision(const std::string& request_id, const Json& request, const Json& decision) {
  if (!decision.is_object()) return;
  const std::string verdict = decision.value("verdict", "");
  auto it = impl_->entries.find(request_id);
  if (verdict == "deny") {
    if (it != impl_->entries.end()) it->second.state = BudgetEntry::State::kReleased;
    return;
  }
  const Json* res = decision.contains("reservation") ? &decision["reservation"] : nullptr;
  if (res == nullptr || !res->is_object()) return;
  BudgetEntry e;
  e.org_id = request.value("org_id", "");
  e.agent_id = request.value("agent_id", "");
  e.session_id = request.value("session_id", "");
  e.tool = request.value("tool", "");
  if (res->contains("usd") && (*res)["usd"].is_number()) e.reserved_micros = UsdToMicros((*res)["usd"].get<double>());
  int64_t at = 0;
  if (res->contains("received_at") && (*res)["received_at"].is_string() &&
      ParseTime((*res)["received_at"].get<std::string>(), &at)) {
    e.at_us = at;
  }
  impl_->Reserve(request_id, std::move(e));
}

void BudgetLedger::Apply(const Event& e) {
  // Listeners may see groups of different stages out of seq order, so seq
  // only records how far the fold has come; idempotence is by request_id.
  if (e.seq > applied_seq_) applied_seq_ = e.seq;
  if (e.request_id.empty()) return;
  if (e.type == "decision.made") {
    Json req = {{"org_id", e.org_id}, {"agent_id", e.agent_id}, {"session_id", e.session_id}, {"tool", e.tool}};
    ApplyDecision(e.request_id, req, e.data);
    return;
  }
  auto it = impl_->entries.find(e.request_id);
  if (it == impl_->entries.end()) return;
  BudgetEntry& b = it->second;
  if (b.state != BudgetEntry::State::kReserved) return;  // settled or released stays so
  if (e.type == "execution.completed") {
    double cost = 0;
    if (e.data.contains("cost_usd") && e.data["cost_usd"].is_number()) cost = e.data["cost_usd"].get<double>();
    b.actual_micros = UsdToMicros(cost);
    b.state = BudgetEntry::State::kSettled;
  } else if (e.type == "approval.denied" || e.type == "approval.expired") {
    b.state = BudgetEntry::State::kReleased;
  }
}

BudgetLedger::Usage BudgetLedger::Sum(Scope scope, const std::string& org_id, const std::string& agent_id,
                                      const std::string& session_id, const std::string& tool, int64_t from_us,
                                      int64_t to_us, const std::string& exclude_request_id) const {
  Usage u;
  auto sit = impl_->by_scope.find(ScopeKey(scope, org_id, agent_id, session_id));
  if (sit == impl_->by_scope.end()) return u;
  const auto& m = sit->second;
  auto it = from_us == INT64_MIN ? m.begin() : m.upper_bound(from_us);
  for (; it != m.end() && it->first <= to_us; ++it) {
    const BudgetEntry& e = *it->second.second;
    if (!tool.empty() && e.tool != tool) continue;
    if (*it->second.first == exclude_request_id) continue;
    u.micros += e.micros();
    if (e.counts_as_call()) ++u.calls;
  }
  return u;
}

const BudgetEntry* BudgetLedger::Find(const std::string& request_id) const {
  auto it = impl_->entries.find(request_id);
  return it == impl_->entries.end() ? nullptr : &it->second;
}

size_t BudgetLedger::size() const { return impl_->entries.size(); }

std::string BudgetLedger::Serialize() const {
  Json entries = Json::object();
  for (const auto& [id, e] : impl_->entries) {
    entries[id] = Json::array({e.org_id, e.agent_id, e.session_id, e.tool, e.at_us, e.reserved_micros,
                               e.actual_micros, static_cast<int>(e.state)});
  }
  Json body = {{"applied_seq", applied_seq_}, {"entries", std::move(entries)}, {"format", "decide-ledger.v1"}};
  std::string bytes;
  (void)CanonicalBytes(body, &bytes);
  Json file = {{"body", std::move(body)}, {"sha256", Sha256Hex(bytes)}};
  std::string out;
  (void)CanonicalBytes(file, &out);
  return out;
}

Status BudgetLedger::Deserialize(std::string_view text, BudgetLedger* out) {
  Json file;
  Status s = ParseJson(text, &file);
  if (!s.ok()) return s;
  try {
    const Json& body = file.at("body");
    std::string bytes;
    if (!(s = CanonicalBytes(body, &bytes)).ok()) return s;
    if (Sha256Hex(bytes) != file.at("sha256").get<std::string>()) {
      return Status::Error(errc::kLogCorrupt, "ledger snapshot checksum mismatch");
    }
    if (body.at("format") != "decide-ledger.v1") return Status::Error(errc::kLogCorrupt, "unknown snapshot format");
    BudgetLedger l;
    for (const auto& [id, a] : body.at("entries").items()) {
      BudgetEntry e;
      e.org_id = a.at(0).get<std::string>();
      e.agent_id = a.at(1).get<std::string>();
      e.session_id = a.at(2).get<std::string>();
      e.tool = a.at(3).get<std::string>();
      e.at_us = a.at(4).get<int64_t>();
      e.reserved_micros = a.at(5).get<int64_t>();
      e.actual_micros = a.at(6).get<int64_t>();
      int st = a.at(7).get<int>();
      if (st < 0 || st > 2) return Status::Error(errc::kLogCorrupt, "bad entry state in ledger snapshot");
      e.state = static_cast<BudgetEntry::State>(st);
      l.impl_->Reserve(id, std::move(e));
    }
    l.applied_seq_ = body.at("applied_seq").get<uint64_t>();
    *out = std::move(l);
  } catch (const std::exception& e) {
    return Status::Error(errc::kLogCorrupt, std::string("ledger snapshot unreadable: ") + e.what());
  }
  return Status::Ok();
}

bool BudgetLedger::operator==(const BudgetLedger& o) const {
  if (applied_seq_ != o.applied_seq_ || impl_->entries.size() != o.impl_->entries.size()) return false;
  for (const auto& [id, e] : impl_->entries) {
    const BudgetEntry* f = o.Find(id);
    if (f == nullptr || f->org_id != e.org_id || f->agent_id != e.agent_id || f->session_id != e.session_id ||
        f->tool != e.tool || f->at_us != e.at_us || f->reserved_micros != e.reserved_micros ||
        f->actual_micros != e.actual_micros || f->state != e.state) {
      return false;
    }
  }
  return true;
}

}  // namespace tollgate
