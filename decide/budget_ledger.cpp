// The budget ledger: a fold over the log keyed by (org_id, request_id)
// (decide/policy_engine.h, docs/policy.md "Budgets").
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "core/sha256.h"
#include "decide/policy_engine.h"

namespace tollgate {

namespace {
int64_t UsdToMicros(double usd) {
  if (!std::isfinite(usd) || usd < 0) return 0;
  return static_cast<int64_t>(std::llround(usd * 1e6));
}
// An entry's key: org NUL request_id. Request ids are scoped by org (two
// orgs may use the same one), and ids hold no control characters, so the
// NUL cannot be forged.
std::string EntryKey(const std::string& org, const std::string& request_id) {
  std::string k;
  k.reserve(org.size() + 1 + request_id.size());
  k += org;
  k += '\0';
  k += request_id;
  return k;
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
    case State::kReserved:
      return reserved_micros;
    case State::kSettled:
      return actual_micros;
    case State::kReleased:
      return 0;
  }
  return 0;
}

// Window sums must be cheap on the hot path: each index (per org, agent and
// session, each also per tool) keeps its entries sorted by time with a
// Fenwick tree of their contributions, so a window sum is two binary
// searches and two O(log n) prefix sums. Entries normally arrive in time
// order (appended); a late one (an older received_at) waits in a small side
// list that is scanned, and folded in by a rebuild once it grows.
namespace {
using Usage = BudgetLedger::Usage;
constexpr int kSlots = 6;  // org, agent, session; each plain and per tool
constexpr size_t kMaxLate = 64;

Usage Contribution(const BudgetEntry& e) { return {e.micros(), e.counts_as_call() ? 1 : 0}; }

struct TimeIndex;
struct Node {
  BudgetEntry e;
  const std::string* key = nullptr;                // the map key (EntryKey)
  int32_t pos[kSlots] = {-1, -1, -1, -1, -1, -1};  // position in each index, -1 = late
  // The node's index of each slot (map nodes: the pointers stay valid), so a
  // transition does not rebuild and look up six keys.
  TimeIndex* ix[kSlots] = {};
  uint64_t final_seq = 0;  // the seq of the event that settled or released it (0: none yet)
  bool doomed = false;     // being pruned
};

struct TimeIndex {
  int slot = 0;
  std::vector<int64_t> times;  // ascending
  std::vector<Node*> nodes;
  std::vector<Usage> fw;  // Fenwick tree, 1-based
  std::vector<Node*> late;
  Usage base;  // what pruned entries contributed: counted by unbounded (session) windows

  bool is_session() const { return slot % 3 == static_cast<int>(BudgetLedger::Scope::kSession); }
  bool empty() const { return nodes.empty() && late.empty(); }
  // Drops the doomed nodes, their contributions kept in `base`.
  void Drop() {
    auto doomed = [](Node* n) { return n->doomed; };
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(), doomed), nodes.end());
    late.erase(std::remove_if(late.begin(), late.end(), doomed), late.end());
    Rebuild();
  }

  Usage Prefix(size_t k) const {  // sum of the first k
    Usage u;
    for (; k > 0; k &= k - 1) {
      u.micros += fw[k].micros;
      u.calls += fw[k].calls;
    }
    return u;
  }
  void AddAt(size_t pos, Usage d) {
    for (size_t k = pos + 1; k < fw.size(); k += k & (~k + 1)) {
      fw[k].micros += d.micros;
      fw[k].calls += d.calls;
    }
  }
  void Add(Node* n) {
    if (times.empty() || n->e.at_us >= times.back()) {
      if (fw.empty()) fw.emplace_back();
      const size_t k = times.size() + 1;
      Usage v = Contribution(n->e);
      Usage lo = Prefix(k - 1), hi = Prefix(k - (k & (~k + 1)));
      fw.push_back({v.micros + lo.micros - hi.micros, v.calls + lo.calls - hi.calls});
      n->pos[slot] = static_cast<int32_t>(times.size());
      times.push_back(n->e.at_us);
      nodes.push_back(n);
      return;
    }
    n->pos[slot] = -1;
    late.push_back(n);
    if (late.size() > kMaxLate) Rebuild();
  }
  void Update(Node* n, Usage d) {
    if (n->pos[slot] >= 0) AddAt(static_cast<size_t>(n->pos[slot]), d);
    // A late node is read directly by Range.
  }
  void Rebuild() {
    std::vector<Node*> all = nodes;
    all.insert(all.end(), late.begin(), late.end());
    std::stable_sort(all.begin(), all.end(), [](Node* a, Node* b) { return a->e.at_us < b->e.at_us; });
    late.clear();
    nodes = std::move(all);
    times.resize(nodes.size());
    fw.assign(nodes.size() + 1, Usage{});
    for (size_t i = 0; i < nodes.size(); ++i) {
      times[i] = nodes[i]->e.at_us;
      nodes[i]->pos[slot] = static_cast<int32_t>(i);
      Usage v = Contribution(nodes[i]->e);
      fw[i + 1].micros += v.micros;
      fw[i + 1].calls += v.calls;
      size_t j = (i + 1) + ((i + 1) & (~(i + 1) + 1));
      if (j < fw.size()) {
        fw[j].micros += fw[i + 1].micros;
        fw[j].calls += fw[i + 1].calls;
      }
    }
  }
  // Entries with at_us in (from, to].
  Usage Range(int64_t from, int64_t to) const {
    Usage u;
    if (to < from) return u;
    if (from == INT64_MIN) u = base;
    size_t i = from == INT64_MIN ? 0 : std::upper_bound(times.begin(), times.end(), from) - times.begin();
    size_t j = std::upper_bound(times.begin(), times.end(), to) - times.begin();
    if (j > i) {
      Usage a = Prefix(j), b = Prefix(i);
      u.micros += a.micros - b.micros;
      u.calls += a.calls - b.calls;
    }
    for (const Node* n : late) {
      if ((from == INT64_MIN || n->e.at_us > from) && n->e.at_us <= to) {
        Usage v = Contribution(n->e);
        u.micros += v.micros;
        u.calls += v.calls;
      }
    }
    return u;
  }
};

std::string IndexKey(BudgetLedger::Scope s, const std::string& org, const std::string& agent,
                     const std::string& session, const std::string* tool) {
  std::string k = ScopeKey(s, org, agent, session);
  if (tool != nullptr) {
    k += '\1';
    k += *tool;
  }
  return k;
}
}  // namespace

struct BudgetLedger::Impl {
  // Transparent, so a key built on the stack is looked up without a string.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // By EntryKey(org, request_id); node-based: pointers stay valid.
  std::unordered_map<std::string, Node, KeyHash, std::equal_to<>> entries;
  std::unordered_map<std::string, TimeIndex> indexes;

  TimeIndex& IndexFor(int slot, const BudgetEntry& e) {
    const Scope s = static_cast<Scope>(slot % 3);
    TimeIndex& ix = indexes[IndexKey(s, e.org_id, e.agent_id, e.session_id, slot >= 3 ? &e.tool : nullptr)];
    ix.slot = slot;
    return ix;
  }
  // The indexes of the last (org, agent, session) reserved, and of its
  // tools: a session's entries share them, so the next entry skips building
  // and looking up their keys. Map nodes: the pointers stay valid.
  struct Recent {
    bool valid = false;
    std::string org, agent, session;
    TimeIndex* scope_ix[3] = {};
    std::vector<std::pair<std::string, std::array<TimeIndex*, 3>>> tools;
  } recent;
  uint64_t pruned_seq = 0;           // decision.made at or below it: folded already
  int64_t newest_at_us = INT64_MIN;  // the newest entry's at_us, ever

  Node* Find(const std::string& org, const std::string& request_id) {
    if (request_id.empty()) return nullptr;
    // On the hot path (every budget check excludes its own request): the
    // key is built on the stack and looked up as a string_view, not
    // allocated each time.
    char buf[256];
    const size_t n = org.size() + 1 + request_id.size();
    if (n > sizeof buf) {
      auto it = entries.find(EntryKey(org, request_id));
      return it == entries.end() ? nullptr : &it->second;
    }
    std::memcpy(buf, org.data(), org.size());
    buf[org.size()] = '\0';
    std::memcpy(buf + org.size() + 1, request_id.data(), request_id.size());
    auto it = entries.find(std::string_view(buf, n));
    return it == entries.end() ? nullptr : &it->second;
  }

  // A new entry for (e.org_id, request_id); nothing when it exists already.
  void Reserve(const std::string& request_id, BudgetEntry e) {
    if (request_id.empty()) return;
    std::string key = EntryKey(e.org_id, request_id);
    if (entries.count(key) != 0) return;  // idempotent
    newest_at_us = std::max(newest_at_us, e.at_us);
    auto [it, _] = entries.emplace(std::move(key), Node{std::move(e)});
    it->second.key = &it->first;
    Node* n = &it->second;
    const BudgetEntry& ne = n->e;
    if (!recent.valid || recent.org != ne.org_id || recent.agent != ne.agent_id ||
        recent.session != ne.session_id) {
      recent.valid = true;
      recent.org = ne.org_id;
      recent.agent = ne.agent_id;
      recent.session = ne.session_id;
      for (int slot = 0; slot < 3; ++slot) recent.scope_ix[slot] = &IndexFor(slot, ne);
      recent.tools.clear();
    }
    auto tool = std::find_if(recent.tools.begin(), recent.tools.end(),
                             [&](const auto& t) { return t.first == ne.tool; });
    if (tool == recent.tools.end()) {
      if (recent.tools.size() >= 16) recent.tools.clear();  // a short list: searched in order
      std::array<TimeIndex*, 3> ix;
      for (int slot = 3; slot < kSlots; ++slot) ix[slot - 3] = &IndexFor(slot, ne);
      recent.tools.emplace_back(ne.tool, ix);
      tool = recent.tools.end() - 1;
    }
    for (int slot = 0; slot < kSlots; ++slot) {
      n->ix[slot] = slot < 3 ? recent.scope_ix[slot] : tool->second[slot - 3];
      n->ix[slot]->Add(n);
    }
  }
  // Moves an entry to a new state, keeping every index's sums right; `seq`
  // is the event's (0 before it is appended).
  void Transition(Node* n, BudgetEntry::State state, int64_t actual_micros, uint64_t seq) {
    if (state != BudgetEntry::State::kReserved && n->final_seq == 0) n->final_seq = seq;
    if (n->e.state == state && n->e.actual_micros == actual_micros) return;
    Usage before = Contribution(n->e);
    n->e.state = state;
    n->e.actual_micros = actual_micros;
    Usage after = Contribution(n->e);
    Usage d{after.micros - before.micros, after.calls - before.calls};
    if (d.micros == 0 && d.calls == 0) return;
    for (int slot = 0; slot < kSlots; ++slot) n->ix[slot]->Update(n, d);
  }
};

BudgetLedger::BudgetLedger() : impl_(std::make_unique<Impl>()) {}
BudgetLedger::~BudgetLedger() = default;
BudgetLedger::BudgetLedger(const BudgetLedger& o)
    : impl_(std::make_unique<Impl>()), applied_seq_(o.applied_seq_) {
  for (const auto& [key, n] : o.impl_->entries) {
    impl_->Reserve(key.substr(n.e.org_id.size() + 1), n.e);
    impl_->entries.at(key).final_seq = n.final_seq;
  }
  for (const auto& [key, ix] : o.impl_->indexes) {
    if (ix.base.micros == 0 && ix.base.calls == 0) continue;
    TimeIndex& mine = impl_->indexes[key];
    mine.slot = ix.slot;
    mine.base = ix.base;
  }
  impl_->pruned_seq = o.impl_->pruned_seq;
  impl_->newest_at_us = o.impl_->newest_at_us;
}
BudgetLedger& BudgetLedger::operator=(const BudgetLedger& o) {
  if (this != &o) {
    BudgetLedger copy(o);
    std::swap(impl_, copy.impl_);
    applied_seq_ = o.applied_seq_;
  }
  return *this;
}

void BudgetLedger::ApplyDecision(const std::string& request_id, const Json& request, const Json& decision,
                                 uint64_t seq) {
  if (!decision.is_object()) return;
  const std::string verdict = decision.value("verdict", "");
  std::string org = request.value("org_id", "");
  if (verdict == "deny") {
    if (Node* n = impl_->Find(org, request_id)) impl_->Transition(n, BudgetEntry::State::kReleased, 0, seq);
    return;
  }
  const Json* res = decision.contains("reservation") ? &decision["reservation"] : nullptr;
  if (res == nullptr || !res->is_object()) return;
  BudgetEntry e;
  e.org_id = std::move(org);
  e.agent_id = request.value("agent_id", "");
  e.session_id = request.value("session_id", "");
  e.tool = request.value("tool", "");
  if (res->contains("usd") && (*res)["usd"].is_number())
    e.reserved_micros = UsdToMicros((*res)["usd"].get<double>());
  int64_t at = 0;
  if (res->contains("received_at") && (*res)["received_at"].is_string() &&
      ParseTime((*res)["received_at"].get<std::string>(), &at)) {
    e.at_us = at;
  }
  impl_->Reserve(request_id, std::move(e));
}

void BudgetLedger::ApplyDecision(const std::string& request_id, const std::string& org_id,
                                 const std::string& agent_id, const std::string& session_id,
                                 const std::string& tool, const Decision& d, uint64_t seq) {
  if (d.verdict == "deny") {
    if (Node* n = impl_->Find(org_id, request_id))
      impl_->Transition(n, BudgetEntry::State::kReleased, 0, seq);
    return;
  }
  if (!d.has_reservation) return;
  BudgetEntry e;
  e.org_id = org_id;
  e.agent_id = agent_id;
  e.session_id = session_id;
  e.tool = tool;
  // As ToJson() writes them and the JSON overload reads them back.
  e.reserved_micros = UsdToMicros(static_cast<double>(d.reserve_micros) / 1e6);
  int64_t at = 0;
  if (ParseTime(d.received_at, &at)) e.at_us = at;
  impl_->Reserve(request_id, std::move(e));
}

void BudgetLedger::Apply(const Event& e) {
  // Listeners may see groups of different stages out of seq order, so seq
  // only records how far the fold has come; idempotence is by
  // (org_id, request_id).
  if (e.seq > applied_seq_) applied_seq_ = e.seq;
  if (e.request_id.empty()) return;
  if (e.type == ev::kDecisionMade) {
    if (e.seq != 0 && e.seq <= impl_->pruned_seq) return;  // folded before pruning
    Json req = {
        {"org_id", e.org_id}, {"agent_id", e.agent_id}, {"session_id", e.session_id}, {"tool", e.tool}};
    ApplyDecision(e.request_id, req, e.data, e.seq);
    return;
  }
  Node* n = impl_->Find(e.org_id, e.request_id);
  if (n == nullptr) return;
  if (n->e.state != BudgetEntry::State::kReserved) return;  // settled or released stays so
  if (e.type == ev::kExecutionCompleted) {
    double cost = 0;
    if (e.data.contains("cost_usd") && e.data["cost_usd"].is_number())
      cost = e.data["cost_usd"].get<double>();
    impl_->Transition(n, BudgetEntry::State::kSettled, UsdToMicros(cost), e.seq);
  } else if (e.type == ev::kApprovalDenied || e.type == ev::kApprovalExpired) {
    impl_->Transition(n, BudgetEntry::State::kReleased, 0, e.seq);
  }
}

size_t BudgetLedger::Prune(uint64_t upto_seq) {
  Impl& im = *impl_;
  im.pruned_seq = std::max(im.pruned_seq, upto_seq);
  if (im.newest_at_us == INT64_MIN) return 0;
  const int64_t cutoff = im.newest_at_us - kPruneKeepUs;
  std::vector<std::unordered_map<std::string, Node>::iterator> gone;
  for (auto it = im.entries.begin(); it != im.entries.end(); ++it) {
    const Node& n = it->second;
    if (n.e.state != BudgetEntry::State::kReserved && n.final_seq != 0 && n.final_seq <= upto_seq &&
        n.e.at_us <= cutoff) {
      gone.push_back(it);
    }
  }
  if (gone.empty()) return 0;
  std::vector<TimeIndex*> touched;
  for (auto it : gone) {
    Node& n = it->second;
    n.doomed = true;
    const Usage v = Contribution(n.e);
    for (TimeIndex* ix : n.ix) {
      ix->base.micros += v.micros;
      ix->base.calls += v.calls;
      touched.push_back(ix);
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (TimeIndex* ix : touched) ix->Drop();
  for (auto it : gone) im.entries.erase(it);
  // An emptied index goes, unless it is a session's and its sum still counts.
  for (auto it = im.indexes.begin(); it != im.indexes.end();) {
    const TimeIndex& ix = it->second;
    const bool keep = !ix.empty() || (ix.is_session() && (ix.base.micros != 0 || ix.base.calls != 0));
    it = keep ? std::next(it) : im.indexes.erase(it);
  }
  im.recent = Impl::Recent{};
  return gone.size();
}

uint64_t BudgetLedger::pruned_seq() const { return impl_->pruned_seq; }

BudgetLedger::Usage BudgetLedger::Sum(Scope scope, const std::string& org_id, const std::string& agent_id,
                                      const std::string& session_id, const std::string& tool, int64_t from_us,
                                      int64_t to_us, const std::string& exclude_request_id) const {
  auto it =
      impl_->indexes.find(IndexKey(scope, org_id, agent_id, session_id, tool.empty() ? nullptr : &tool));
  if (it == impl_->indexes.end()) return {};
  Usage u = it->second.Range(from_us, to_us);
  // The request being decided never counts against itself, so deciding it
  // again (after a failed append) gives the same answer. It is the request
  // of this org: another org's request with the same id is another entry.
  if (const BudgetEntry* self = Find(org_id, exclude_request_id)) {
    bool same = self->org_id == org_id && (scope == Scope::kOrg || self->agent_id == agent_id) &&
                (scope != Scope::kSession || self->session_id == session_id) &&
                (tool.empty() || self->tool == tool) && (from_us == INT64_MIN || self->at_us > from_us) &&
                self->at_us <= to_us;
    if (same) {
      Usage v = Contribution(*self);
      u.micros -= v.micros;
      u.calls -= v.calls;
    }
  }
  return u;
}

const BudgetEntry* BudgetLedger::Find(const std::string& org_id, const std::string& request_id) const {
  const Node* n = impl_->Find(org_id, request_id);
  return n == nullptr ? nullptr : &n->e;
}

size_t BudgetLedger::size() const { return impl_->entries.size(); }

void BudgetLedger::ForEachEntry(const std::function<void(const BudgetEntry&)>& fn) const {
  for (const auto& [key, node] : impl_->entries) fn(node.e);
}

namespace {
// v3: entries are [org_id, request_id, agent_id, session_id, tool, at_us,
// reserved_micros, actual_micros, state, final_seq], sorted by (org_id,
// request_id); "pruned" lists the sums pruned entries left, as [hex of the
// index key, slot, micros, calls] sorted by key; "pruned_seq" and
// "newest_at_us" as Prune keeps them. v2 lacked final_seq and the sums; v1
// keyed entries by request_id alone: both are refused, and the log folded
// again.
constexpr const char* kLedgerFormat = "decide-ledger.v3";

bool KeyFromHex(const std::string& hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}
}  // namespace

std::string BudgetLedger::Serialize() const {
  std::vector<const std::pair<const std::string, Node>*> sorted;
  sorted.reserve(impl_->entries.size());
  for (const auto& kv : impl_->entries) sorted.push_back(&kv);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  Json entries = Json::array();
  for (const auto* kv : sorted) {
    const BudgetEntry& e = kv->second.e;
    entries.push_back(Json::array({e.org_id, kv->first.substr(e.org_id.size() + 1), e.agent_id, e.session_id,
                                   e.tool, e.at_us, e.reserved_micros, e.actual_micros,
                                   static_cast<int>(e.state), kv->second.final_seq}));
  }
  std::vector<std::pair<std::string, const TimeIndex*>> bases;
  for (const auto& [key, ix] : impl_->indexes) {
    if (ix.base.micros != 0 || ix.base.calls != 0)
      bases.emplace_back(ToHex(reinterpret_cast<const uint8_t*>(key.data()), key.size()), &ix);
  }
  std::sort(bases.begin(), bases.end());
  Json pruned = Json::array();
  for (const auto& [hex, ix] : bases)
    pruned.push_back(Json::array({hex, ix->slot, ix->base.micros, ix->base.calls}));
  Json body = {{"applied_seq", applied_seq_},     {"entries", std::move(entries)},
               {"format", kLedgerFormat},         {"pruned", std::move(pruned)},
               {"pruned_seq", impl_->pruned_seq}, {"newest_at_us", impl_->newest_at_us}};
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
    if (body.at("format") != kLedgerFormat)
      return Status::Error(errc::kLogCorrupt, "unknown snapshot format");
    BudgetLedger l;
    const Json& entries = body.at("entries");
    if (!entries.is_array())
      return Status::Error(errc::kLogCorrupt, "ledger snapshot entries are not a list");
    for (const auto& a : entries) {
      BudgetEntry e;
      e.org_id = a.at(0).get<std::string>();
      const std::string request_id = a.at(1).get<std::string>();
      e.agent_id = a.at(2).get<std::string>();
      e.session_id = a.at(3).get<std::string>();
      e.tool = a.at(4).get<std::string>();
      e.at_us = a.at(5).get<int64_t>();
      e.reserved_micros = a.at(6).get<int64_t>();
      e.actual_micros = a.at(7).get<int64_t>();
      int st = a.at(8).get<int>();
      if (st < 0 || st > 2) return Status::Error(errc::kLogCorrupt, "bad entry state in ledger snapshot");
      e.state = static_cast<BudgetEntry::State>(st);
      const std::string key = EntryKey(e.org_id, request_id);
      l.impl_->Reserve(request_id, std::move(e));
      l.impl_->entries.at(key).final_seq = a.at(9).get<uint64_t>();
    }
    for (const auto& a : body.at("pruned")) {
      std::string key;
      const int slot = a.at(1).get<int>();
      if (!KeyFromHex(a.at(0).get<std::string>(), &key) || slot < 0 || slot >= kSlots) {
        return Status::Error(errc::kLogCorrupt, "bad pruned sum in ledger snapshot");
      }
      TimeIndex& ix = l.impl_->indexes[key];
      ix.slot = slot;
      ix.base = {a.at(2).get<int64_t>(), a.at(3).get<int64_t>()};
    }
    l.impl_->pruned_seq = body.at("pruned_seq").get<uint64_t>();
    l.impl_->newest_at_us = std::max(l.impl_->newest_at_us, body.at("newest_at_us").get<int64_t>());
    l.impl_->recent = Impl::Recent{};
    l.applied_seq_ = body.at("applied_seq").get<uint64_t>();
    *out = std::move(l);
  } catch (const std::exception& e) {
    return Status::Error(errc::kLogCorrupt, std::string("ledger snapshot unreadable: ") + e.what());
  }
  return Status::Ok();
}

bool BudgetLedger::operator==(const BudgetLedger& o) const {
  if (applied_seq_ != o.applied_seq_ || impl_->entries.size() != o.impl_->entries.size()) return false;
  auto bases = [](const Impl& im) {
    std::vector<std::tuple<std::string, int64_t, int64_t>> out;
    for (const auto& [key, ix] : im.indexes) {
      if (ix.base.micros != 0 || ix.base.calls != 0) out.emplace_back(key, ix.base.micros, ix.base.calls);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  if (bases(*impl_) != bases(*o.impl_)) return false;
  for (const auto& [key, n] : impl_->entries) {
    const BudgetEntry& e = n.e;
    const BudgetEntry* f = o.Find(e.org_id, key.substr(e.org_id.size() + 1));
    if (f == nullptr || f->org_id != e.org_id || f->agent_id != e.agent_id || f->session_id != e.session_id ||
        f->tool != e.tool || f->at_us != e.at_us || f->reserved_micros != e.reserved_micros ||
        f->actual_micros != e.actual_micros || f->state != e.state) {
      return false;
    }
  }
  return true;
}

}  // namespace tollgate
