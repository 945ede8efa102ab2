// The session facts fold (decide/session_facts.h; docs/policy.md, "History").
#include "decide/session_facts.h"

#include <algorithm>

#include "core/tool_catalog.h"
#include "core/url.h"
#include "decide/compiled_policy.h"
#include "decide/decide_checks.h"
#include "decide/policy_in_force.h"

namespace tollgate {

namespace {

constexpr const char* kIntegrity[] = {"trusted", "untrusted"};
constexpr const char* kConfidentiality[] = {"public", "internal", "confidential", "secret"};
// Seqs of folded completions kept for idempotency: more than twice the
// refold margin (decide/decide_state.h), so a refold never folds one twice.
constexpr size_t kSeenWindow = 8192;

std::string Key(const std::string& a, const std::string& b) {
  std::string k;
  k.reserve(a.size() + 1 + b.size());
  k.append(a).push_back('\0');
  k.append(b);
  return k;
}

// The host of the URL an invocation names ("http_request:GET https://h/p"),
// "" when it names none.
std::string HostOf(const std::string& invocation) {
  const size_t at = invocation.find("://");
  if (at == std::string::npos) return "";
  size_t start = invocation.rfind(' ', at);
  start = start == std::string::npos ? invocation.find(':') + 1 : start + 1;
  size_t end = invocation.find(' ', at);
  NormalUrl url;
  std::string why;
  if (!NormalizeUrl(invocation.substr(start, end == std::string::npos ? std::string::npos : end - start), "",
                    &url, &why, Userinfo::kDrop)) {
    return "";
  }
  return url.host;
}

// Results from the network or the web: http_request and its aliases, the
// catalog's web and network tools.
bool FromNetwork(const CallRecord& call) {
  if (call.tool == "http_request" || call.invocation.rfind("http_request:", 0) == 0) return true;
  const ToolFacts* b = FindBuiltinTool(call.tool);
  return b != nullptr && (b->category == "web" || b->category == "network");
}

bool Matches(const CallPattern& p, const CallRecord& call, Integrity integrity, Confidentiality conf) {
  if (p.tools.size() != 0 && p.tools.FirstMatch(call.tool) < 0) return false;
  if (p.invocations.size() != 0 &&
      decide_checks::MatchSubjects(p.invocations, call.invocation, call.subject) < 0)
    return false;
  if (p.has_integrity && integrity != p.integrity) return false;
  return !p.has_confidentiality || conf >= p.confidentiality;
}

}  // namespace

const char* IntegrityName(Integrity i) { return kIntegrity[static_cast<int>(i)]; }
const char* ConfidentialityName(Confidentiality c) { return kConfidentiality[static_cast<int>(c)]; }

bool ParseIntegrity(const std::string& s, Integrity* out) {
  for (int i = 0; i < 2; ++i) {
    if (s == kIntegrity[i]) {
      *out = static_cast<Integrity>(i);
      return true;
    }
  }
  return false;
}

bool ParseConfidentiality(const std::string& s, Confidentiality* out) {
  for (int i = 0; i < 4; ++i) {
    if (s == kConfidentiality[i]) {
      *out = static_cast<Confidentiality>(i);
      return true;
    }
  }
  return false;
}

void ClassifyResult(const CompiledLabels* labels, const CallRecord& call, Integrity* integrity,
                    Confidentiality* confidentiality) {
  Integrity in = Integrity::kTrusted;
  if (FromNetwork(call)) {
    const std::string host = HostOf(call.invocation);
    const bool trusted = labels != nullptr && labels->has_trusted_hosts && !host.empty() &&
                         labels->trusted_hosts.FirstMatch(host) >= 0;
    if (!trusted) in = Integrity::kUntrusted;
  } else if (call.tool.rfind("mcp:", 0) == 0) {
    const std::string server = call.tool.substr(4, call.tool.find('/') - 4);
    if (labels == nullptr || labels->trusted_servers.count(server) == 0) in = Integrity::kUntrusted;
  }
  Confidentiality conf = Confidentiality::kPublic;
  if (labels != nullptr) {
    if (decide_checks::MatchSubjects(labels->untrusted, call.invocation, call.subject) >= 0)
      in = Integrity::kUntrusted;
    if (decide_checks::MatchSubjects(labels->trusted, call.invocation, call.subject) >= 0)
      in = Integrity::kTrusted;
    for (int level = 3; level > 0 && conf == Confidentiality::kPublic; --level) {
      if (decide_checks::MatchSubjects(labels->levels[level], call.invocation, call.subject) >= 0)
        conf = static_cast<Confidentiality>(level);
    }
  }
  if (call.redacted) conf = std::max(conf, labels != nullptr ? labels->redacted : Confidentiality::kSecret);
  *integrity = in;
  *confidentiality = conf;
}

void SessionFacts::ApplyDecision(const std::string& org, const std::string& request_id,
                                 const std::string& session, const std::string& verdict,
                                 const std::string& invocation, const std::string& subject, uint64_t) {
  if (request_id.empty()) return;
  if (verdict == "allow" || verdict == "ask") {
    Pending& p = pending_[Key(org, request_id)];
    p.session = session;
    p.invocation = invocation;
    p.subject = subject;
  } else {
    pending_.erase(Key(org, request_id));
    if (counterfactual_) denied_.insert(Key(org, request_id));
  }
}

bool SessionFacts::Seen(uint64_t seq) {
  if (seq != 0 && seq <= floor_) return true;
  auto it = std::lower_bound(seen_.begin(), seen_.end(), seq);
  if (it != seen_.end() && *it == seq) return true;
  seen_.insert(it, seq);
  if (seen_.size() > 2 * kSeenWindow) {
    floor_ = seen_[kSeenWindow - 1];
    seen_.erase(seen_.begin(), seen_.begin() + kSeenWindow);
  }
  return false;
}

void SessionFacts::Apply(const PolicyInForce& policy, const Event& e) {
  if (e.type == ev::kDecisionMade) {
    if (!e.data.is_object()) return;
    ApplyDecision(e.org_id, e.request_id, e.session_id, e.data.value("verdict", ""),
                  e.data.value("invocation", ""), e.data.value("subject", ""), e.seq);
  } else if (e.type == ev::kApprovalDenied || e.type == ev::kApprovalExpired) {
    pending_.erase(Key(e.org_id, e.request_id));
  } else if (e.type == ev::kApprovalGranted) {
    if (!e.data.is_object() || e.data.value("declassify", false) != true) return;
    auto p = pending_.find(Key(e.org_id, e.request_id));
    if (p == pending_.end() || p->second.declassify_seq != 0) return;  // the first declassifying grant counts
    p->second.declassify_seq = e.seq;
    p->second.by = e.data.value("approver", "");
    p->second.why = e.data.value("comment", "");
  } else if (e.type == ev::kExecutionCompleted) {
    const std::string request = Key(e.org_id, e.request_id);
    auto p = pending_.find(request);
    if (Seen(e.seq)) {
      if (p != pending_.end()) pending_.erase(p);  // re-created by a refold's decision.made
      return;
    }
    if (counterfactual_ && denied_.erase(request) != 0) return;  // it no longer ran
    CallRecord call;
    call.tool = e.tool;
    if (p != pending_.end()) {
      call.invocation = std::move(p->second.invocation);
      call.subject = std::move(p->second.subject);
      if (p->second.declassify_seq != 0) {
        Item d;
        d.seq = e.seq;
        d.at_us = e.time_us;
        d.declassify = true;
        d.declassify_seq = p->second.declassify_seq;
        d.by = std::move(p->second.by);
        d.why = std::move(p->second.why);
        Fold(Key(e.org_id, e.session_id), std::move(d));
      }
      pending_.erase(p);
    }
    if (e.data.is_object()) {
      auto r = e.data.find("redacted");
      call.redacted = r != e.data.end() && r->is_array() && !r->empty();
    }
    const Policy::Compiled* c = policy.has_policy() ? &policy.file()->compiled(e.org_id) : nullptr;
    Item item;
    item.seq = e.seq;
    item.at_us = e.time_us;
    item.tool = call.tool;
    ClassifyResult(c != nullptr ? &c->labels : nullptr, call, &item.integrity, &item.confidentiality);
    if (c != nullptr) {
      for (const CallPattern& pat : c->after_patterns) {
        if (Matches(pat, call, item.integrity, item.confidentiality)) item.patterns.push_back(pat.key);
      }
    }
    Fold(Key(e.org_id, e.session_id), std::move(item));
  }
}

void SessionFacts::Fold(const std::string& key, Item item) {
  if (deferred_) {
    waiting_[key].push_back(std::move(item));
  } else {
    AddTo(sessions_[key], item);
  }
}

void SessionFacts::AddTo(Session& s, const Item& item) {
  s.upto = std::max(s.upto, item.seq);
  if (item.declassify) {
    s.integrity = Integrity::kTrusted;
    s.integrity_seq = 0;
    s.confidentiality = Confidentiality::kPublic;
    s.confidentiality_seq = 0;
    s.matches.clear();
    s.declassified_seq = item.declassify_seq;
    s.declassified_by = item.by;
    s.declassified_why = item.why;
    return;
  }
  ++s.calls;
  ++s.per_tool[item.tool];
  if (item.integrity == Integrity::kUntrusted && s.integrity == Integrity::kTrusted) {
    s.integrity = Integrity::kUntrusted;
    s.integrity_seq = item.seq;
  }
  if (item.confidentiality > s.confidentiality) {
    s.confidentiality = item.confidentiality;
    s.confidentiality_seq = item.seq;
  }
  for (const std::string& k : item.patterns) {
    std::vector<Match>& v = s.matches[k];
    v.push_back(
        {item.seq, item.at_us, s.calls, v.empty() ? item.at_us : std::max(v.back().max_at, item.at_us)});
    if (v.size() > kMaxMatches) v.erase(v.begin());
  }
}

const SessionFacts::Session* SessionFacts::Find(const std::string& org, const std::string& session) const {
  thread_local std::string key;  // decide's hot path: no allocation per lookup
  key.assign(org).push_back('\0');
  key.append(session);
  auto it = sessions_.find(key);
  return it == sessions_.end() ? nullptr : &it->second;
}

void SessionFacts::CatchUp(const std::string& org, const std::string& session, uint64_t upto) {
  auto it = waiting_.find(Key(org, session));
  if (it == waiting_.end()) return;
  std::vector<Item>& items = it->second;
  size_t n = 0;
  Session* s = nullptr;
  while (n < items.size() && items[n].seq <= upto) {
    if (s == nullptr) s = &sessions_[it->first];
    AddTo(*s, items[n++]);
  }
  if (n == items.size()) {
    waiting_.erase(it);
  } else {
    items.erase(items.begin(), items.begin() + n);
  }
}

// ---------------------------------------------------------------------------
// The snapshot's form.
Json SessionFacts::ToJson() const {
  Json pending = Json::array(), sessions = Json::array();
  for (const auto& [key, p] : pending_) {
    const size_t z = key.find('\0');
    pending.push_back({key.substr(0, z), key.substr(z + 1), p.session, p.invocation, p.subject,
                       p.declassify_seq, p.by, p.why});
  }
  for (const auto& [key, s] : sessions_) {
    const size_t z = key.find('\0');
    Json matches = Json::object();
    for (const auto& [k, v] : s.matches) {
      Json arr = Json::array();
      for (const Match& m : v) arr.push_back({m.seq, m.at_us, m.call});
      matches[k] = std::move(arr);
    }
    sessions.push_back({{"org", key.substr(0, z)},
                        {"session", key.substr(z + 1)},
                        {"integrity", IntegrityName(s.integrity)},
                        {"integrity_seq", s.integrity_seq},
                        {"confidentiality", ConfidentialityName(s.confidentiality)},
                        {"confidentiality_seq", s.confidentiality_seq},
                        {"calls", s.calls},
                        {"upto", s.upto},
                        {"per_tool", s.per_tool},
                        {"matches", std::move(matches)},
                        {"declassified", {s.declassified_seq, s.declassified_by, s.declassified_why}}});
  }
  return {
      {"pending", std::move(pending)}, {"sessions", std::move(sessions)}, {"seen", seen_}, {"floor", floor_}};
}

Status SessionFacts::FromJson(const Json& j, SessionFacts* out) {
  SessionFacts f;
  try {
    for (const Json& p : j.at("pending")) {
      f.pending_[Key(p.at(0).get<std::string>(), p.at(1).get<std::string>())] = {
          p.at(2).get<std::string>(), p.at(3).get<std::string>(), p.at(4).get<std::string>(),
          p.at(5).get<uint64_t>(),    p.at(6).get<std::string>(), p.at(7).get<std::string>()};
    }
    for (const Json& s : j.at("sessions")) {
      Session& x = f.sessions_[Key(s.at("org").get<std::string>(), s.at("session").get<std::string>())];
      if (!ParseIntegrity(s.at("integrity").get<std::string>(), &x.integrity) ||
          !ParseConfidentiality(s.at("confidentiality").get<std::string>(), &x.confidentiality)) {
        return Status::Error(errc::kLogCorrupt, "session facts: unknown label");
      }
      x.integrity_seq = s.at("integrity_seq").get<uint64_t>();
      x.confidentiality_seq = s.at("confidentiality_seq").get<uint64_t>();
      x.calls = s.at("calls").get<uint64_t>();
      x.upto = s.at("upto").get<uint64_t>();
      x.per_tool = s.at("per_tool").get<std::map<std::string, uint64_t>>();
      for (const auto& [k, v] : s.at("matches").items()) {
        std::vector<Match>& ms = x.matches[k];
        for (const Json& m : v) {
          const int64_t at = m.at(1).get<int64_t>();
          ms.push_back({m.at(0).get<uint64_t>(), at, m.at(2).get<uint64_t>(),
                        ms.empty() ? at : std::max(ms.back().max_at, at)});
        }
      }
      const Json& d = s.at("declassified");
      x.declassified_seq = d.at(0).get<uint64_t>();
      x.declassified_by = d.at(1).get<std::string>();
      x.declassified_why = d.at(2).get<std::string>();
    }
    f.seen_ = j.at("seen").get<std::vector<uint64_t>>();
    f.floor_ = j.at("floor").get<uint64_t>();
  } catch (const std::exception& e) {
    return Status::Error(errc::kLogCorrupt, std::string("session facts: ") + e.what());
  }
  if (!std::is_sorted(f.seen_.begin(), f.seen_.end()))
    return Status::Error(errc::kLogCorrupt, "session facts: seen seqs out of order");
  *out = std::move(f);
  return Status::Ok();
}

}  // namespace tollgate
