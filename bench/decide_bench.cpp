#include "bench/decide_bench.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <regex>

#include "decide/policy_engine.h"
#include "decide/session_facts.h"

namespace tollgate::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kT0 = 1'795'000'000'000'000;  // a fixed received_at (2026)

// A policy with `rules` rules in all: deny and allow globs at org and agent
// tiers, argument rules, tool grants, http config, budgets.
Json MakePolicy(size_t rules) {
  Json deny = Json::array(), allow = Json::array(), arg_rules = Json::array();
  for (const char* d : {"*:*password*", "*:*.env*", "*:*id_rsa*", "*:*/etc/shadow*"}) deny.push_back(d);
  size_t n = 4;
  for (size_t i = 0; n < rules / 4; ++i, ++n) deny.push_back("cli:forbidden-" + std::to_string(i) + "*");
  for (size_t i = 0; n < rules * 3 / 4; ++i, ++n) {
    switch (i % 4) {
      case 0:
        allow.push_back("cli:tool-" + std::to_string(i) + "*");
        break;
      case 1:
        allow.push_back("http_request:GET https://api" + std::to_string(i) + ".example.com/*");
        break;
      case 2:
        allow.push_back("bash:git " + std::to_string(i) + "*");
        break;
      default:
        allow.push_back("read_file:/srv/data" + std::to_string(i) + "/*");
        break;
    }
  }
  Json agents = Json::object();
  size_t a = 0;
  while (n < rules) {
    Json tier = {{"allow", Json::array()}, {"deny", Json::array()}};
    for (int k = 0; k < 8 && n < rules; ++k, ++n) {
      tier[k % 4 == 0 ? "deny" : "allow"].push_back("cli:agent" + std::to_string(a) + "-" +
                                                    std::to_string(k) + "*");
    }
    if (n < rules) {
      arg_rules.push_back({{"name", "no-admin-" + std::to_string(a)},
                           {"tool", "http_request"},
                           {"when", {{"path_prefix", "/admin" + std::to_string(a)}}},
                           {"verdict", "deny"}});
      ++n;
    }
    if (a % 3 == 0) tier["mode"] = "restrict";
    tier["http_request"] = {{"allowed_methods", {"GET", "HEAD", "POST"}}, {"hosts", {"*.example.com"}}};
    agents["agent-" + std::to_string(a++)] = tier;
  }
  return {
      {"mode", "ask"},
      {"approval_threshold", "HIGH"},
      {"deny", deny},
      {"allow", allow},
      {"rules", arg_rules},
      {"orgs",
       {{"acme", {{"agents", agents}}}}},  // the requests' org (docs/policy.md, "Agents belong to an org")
      {"http_request", {{"allowed_methods", {"GET", "HEAD", "POST", "PUT", "DELETE"}}}},
      {"budgets",
       {{{"name", "session-usd"}, {"scope", "session"}, {"window", "session"}, {"max_usd", 1000}},
        {{"name", "agent-hour-calls"}, {"scope", "agent"}, {"window", "hour"}, {"max_calls", 1000000}},
        {{"name", "org-day-usd"}, {"scope", "org"}, {"window", "day"}, {"max_usd", 100000}}}},
      {"approvals", {{"default", {{"quorum", 1}}}, {"danger", {{"CRITICAL", {{"quorum", 2}}}}}}}};
}

std::vector<Json> MakeRequests(size_t agents) {
  std::vector<Json> out;
  auto req = [&](size_t i, const std::string& tool, Json args) {
    out.push_back({{"request_id", "r" + std::to_string(i)},
                   {"org_id", "acme"},
                   {"agent_id", "agent-" + std::to_string(i % std::max<size_t>(agents, 1))},
                   {"session_id", "s" + std::to_string(i % 50)},
                   {"tool", tool},
                   {"args", std::move(args)}});
  };
  for (size_t i = 0; i < 64; ++i) {
    switch (i % 8) {
      case 0:
        req(i, "echo", {{"text", "hi"}});
        break;
      case 1:
        req(i, "read_file", {{"path", "/srv/data" + std::to_string(i) + "/x.csv"}});
        break;
      case 2:
        req(i, "http_request",
            {{"method", "GET"}, {"url", "https://api" + std::to_string(i % 40) + ".example.com/v1/x"}});
        break;
      case 3:
        req(i, "http_request", {{"method", "POST"}, {"url", "https://api.example.com/admin3/x"}});
        break;
      case 4:
        req(i, "execute_command", {{"command", "git status"}});
        break;
      case 5:
        req(i, "cli:tool-" + std::to_string(i) + "-run", Json::object());
        break;
      case 6:
        req(i, "write_file", {{"path", "notes/todo.txt"}, {"content", "x"}});
        break;
      default:
        req(i, "read_file", {{"path", "/home/u/.env"}});
        break;
    }
  }
  return out;
}

struct Lat {
  double p50 = 0, p99 = 0, per_s = 0;
};

// p50 and p99 of `ns` (sorted here), in µs.
Lat Percentiles(std::vector<double>& ns) {
  std::sort(ns.begin(), ns.end());
  Lat l;
  l.p50 = ns[ns.size() / 2] / 1000;
  l.p99 = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)] / 1000;
  return l;
}

// `facts`: the session facts history rules read (null: none). `keep`: the
// samples (ns) are appended to it too.
Lat TimeDecisions(const PolicyInForce& pif, const BudgetLedger& ledger, const std::vector<Json>& reqs,
                  size_t n, bool json, const SessionFacts* facts = nullptr,
                  std::vector<double>* keep = nullptr) {
  std::vector<double> ns;
  ns.reserve(n);
  Decision d;
  size_t sink = 0;
  DecideInput in;
  in.facts = facts;
  for (size_t i = 0; i < std::min<size_t>(n / 10 + 1, 2000); ++i) {  // warm up
    in.request = &reqs[i % reqs.size()];
    in.received_at_us = kT0;
    DecideInto(pif, ledger, in, &d);
  }
  auto start = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    in.request = &reqs[i % reqs.size()];
    in.received_at_us = kT0 + static_cast<int64_t>(i);
    auto t0 = Clock::now();
    if (json) {
      Json j = Decide(pif, ledger, in);
      sink += j.size();
    } else {
      DecideInto(pif, ledger, in, &d);
      sink += d.verdict.size();
    }
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (keep != nullptr) keep->insert(keep->end(), ns.begin(), ns.end());
  Lat l = Percentiles(ns);
  l.per_s = static_cast<double>(n) / total_s;
  if (sink == 0) std::cerr << "";  // keep the work observable
  return l;
}

std::string GlobToRegex(const std::string& g) {
  std::string out;
  for (size_t i = 0; i < g.size(); ++i) {
    char c = g[i];
    if (c == '*')
      out += ".*";
    else if (c == '?')
      out += '.';
    else if (c == '\\' && i + 1 < g.size())
      out += std::string("\\") + g[++i];
    else if (std::string_view(".^$|()[]{}+").find(c) != std::string_view::npos)
      out += std::string("\\") + c;
    else
      out += c;
  }
  return out;
}

// ---------------------------------------------------------------------------
// History (docs/policy.md, "History"): the 100-rule policy plus `labels:`
// and 20 history rules, deciding calls of sessions of 1,000 completed calls.

constexpr size_t kRecentCalls = 100;        // a session's last calls: routine work
constexpr int64_t kCallGapUs = 20'000'000;  // a session's calls are 20 s apart

Json HistoryLabels() {
  return {{"trusted_hosts", Json::array({"api.example.com", "docs.example.com"})},
          {"untrusted", Json::array({"cli:scrape*"})},
          {"trusted", Json::array({"http_request:GET https://docs.example.com/*"})},
          {"internal", Json::array({"read_file:/srv/data/*"})},
          {"confidential", Json::array({"cli:db-dump*", "read_file:/srv/hr/*"})},
          {"secret", Json::array({"read_file:/srv/secrets/*", "*:*.pem"})}};
}

// 14 sequence rules and 6 label rules. As in production most conditions
// are false for the sessions FoldSessions makes (what a rule guards against
// is rare), but then: names tools the timed requests use, so the session
// lookup and the scan of its matches run: a window of minutes with no
// recent match scans the whole ring (100 matches); one of calls stops at
// the first match outside it. Sequence rules come first in the list so
// that their scans run before a label rule of the same step decides.
Json HistoryRules() {
  auto seq = [](const char* name, Json after, Json within, Json then, const char* verdict) {
    return Json{{"name", name},
                {"after", std::move(after)},
                {"within", std::move(within)},
                {"then", std::move(then)},
                {"verdict", verdict}};
  };
  auto label = [](const char* name, const char* tool, Json when, const char* verdict) {
    return Json{{"name", name}, {"tool", tool}, {"when", std::move(when)}, {"verdict", verdict}};
  };
  const Json fetched_untrusted = {{"tool", "http_request"}, {"result", {{"integrity", "untrusted"}}}};
  const Json untrusted = {{"session", {{"integrity", "untrusted"}}}};
  const Json mutating = Json::array({"POST", "PUT", "PATCH", "DELETE"});
  Json rules = Json::array();
  // Deny rules (step 4): exfiltration after secret or untrusted content.
  rules.push_back(
      seq("fetch-then-exec", fetched_untrusted, {{"calls", 10}}, {{"tool", "execute_command"}}, "deny"));
  rules.push_back(seq("secret-then-http", {{"invocation", "read_file:/srv/secrets/*"}}, {{"minutes", 30}},
                      {{"tool", "http_request"}}, "deny"));
  rules.push_back(seq("secret-then-upload", {{"result", {{"confidentiality", "secret"}}}}, {{"calls", 50}},
                      {{"tool", "http_request"}, {"when", {{"method", mutating}}}}, "deny"));
  rules.push_back(seq("dump-then-http", {{"invocation", "cli:db-dump*"}}, {{"calls", 100}},
                      {{"tool", "http_request"}}, "deny"));
  rules.push_back(seq("untrusted-then-secret-read", {{"result", {{"integrity", "untrusted"}}}},
                      {{"calls", 5}}, {{"invocation", "read_file:/srv/secrets/*"}}, "deny"));
  // Ask rules (step 15b: an allow becomes an ask).
  rules.push_back(seq("delete-burst", {{"tool", "delete_file"}, {"count", 5}}, {{"minutes", 10}},
                      {{"tool", "delete_file"}}, "ask"));
  rules.push_back(
      seq("fetch-then-write", fetched_untrusted, {{"minutes", 30}}, {{"tool", "write_file"}}, "ask"));
  rules.push_back(seq("home-reads-then-write",
                      {{"tool", "read_file"}, {"invocation", "read_file:/home/*"}, {"count", 2}},
                      {{"minutes", 15}}, {{"tool", "write_file"}}, "ask"));
  rules.push_back(
      seq("mcp-then-write", {{"tool", "mcp:*"}}, {{"calls", 30}}, {{"tool", "write_file"}}, "ask"));
  rules.push_back(seq("paste-then-exec", {{"invocation", "http_request:* https://paste.example.com/*"}},
                      {{"minutes", 1440}}, {{"tool", "execute_command"}}, "ask"));
  rules.push_back(seq("fetch-burst-then-cli", {{"tool", "http_request"}, {"count", 6}}, {{"calls", 20}},
                      {{"tool", "cli:*"}}, "ask"));
  rules.push_back(seq("confidential-then-cli", {{"result", {{"confidentiality", "confidential"}}}},
                      {{"minutes", 120}}, {{"tool", "cli:*"}}, "ask"));
  rules.push_back(
      seq("cli-burst", {{"tool", "cli:*"}, {"count", 4}}, {{"minutes", 1}}, {{"tool", "cli:*"}}, "ask"));
  rules.push_back(
      seq("echo-storm", {{"tool", "echo"}, {"count", 5}}, {{"calls", 5}}, {{"tool", "echo"}}, "ask"));
  // Label rules: three on tools the timed requests use, three on others.
  rules.push_back(label("untrusted-no-write", "write_file", untrusted, "ask"));
  rules.push_back(label("untrusted-no-exec", "execute_command", untrusted, "ask"));
  rules.push_back(label("secret-no-egress", "http_request",
                        {{"method", mutating}, {"session", {{"confidentiality", "secret"}}}}, "deny"));
  rules.push_back(label("confidential-no-upload", "cli:upload*",
                        {{"session", {{"confidentiality", "confidential"}}}}, "deny"));
  rules.push_back(label("untrusted-no-mail", "cli:mail*", untrusted, "deny"));
  rules.push_back(
      label("secret-no-delete", "delete_file", {{"session", {{"confidentiality", "secret"}}}}, "ask"));
  return rules;
}

// What a session's earlier work touched (its labels stick: one untrusted
// result keeps the session untrusted). 25 of 200 sessions fetched from an
// untrusted host, 20 read secrets, 20 dumped a database; the rest are clean.
enum Profile { kClean = 0, kUntrusted, kSecret, kConfidential, kProfiles };
Profile ProfileOf(size_t session) {
  if (session % 8 == 0) return kUntrusted;
  if (session % 10 == 3) return kSecret;
  return session % 10 == 7 ? kConfidential : kClean;
}

// A session's call at `slot` (its call index % 10), as a request: of its
// earlier work (variant 0, or 1 every other ten calls: enough of each kind
// that every pattern's ring of 100 matches fills), or of its last
// kRecentCalls calls (variant 2: routine, nothing untrusted, secret or
// confidential).
constexpr int kVariants = 3;
Json HistoryCall(Profile p, int variant, size_t slot) {
  auto call = [](const char* tool, Json args) {
    return Json{{"request_id", "fold"}, {"org_id", "acme"}, {"agent_id", "agent-1"},
                {"session_id", "fold"}, {"tool", tool},     {"args", std::move(args)}};
  };
  auto get = [&](const char* url) { return call("http_request", {{"method", "GET"}, {"url", url}}); };
  auto read = [&](const char* path) { return call("read_file", {{"path", path}}); };
  const bool alt = variant == 1;
  if (variant == 2) {
    static const size_t kKind[10] = {0, 1, 2, 3, 0, 4, 1, 0, 5, 2};
    switch (kKind[slot]) {
      case 0:
        return call("echo", {{"text", "ok"}});
      case 1:
        return read("/srv/data/daily.csv");
      case 2:
        return call("cli:report", Json::object());
      case 3:
        return get("https://api.example.com/v1/items");
      case 4:
        return call("execute_command", {{"command", "git status"}});
      default:
        return call("write_file", {{"path", "notes/summary.txt"}, {"content", "x"}});
    }
  }
  switch (slot) {
    case 0:
      return get(alt && p == kUntrusted ? "https://paste.example.com/raw/x0"
                                        : "https://api.example.com/v1/items");
    case 1:
      return read(!alt           ? "/srv/data/input.csv"
                  : p == kSecret ? "/srv/secrets/ci.pem"
                                 : "/home/u/notes/todo.md");
    case 2:
      return alt ? call("delete_file", {{"path", "/tmp/scratch/new.tmp"}}) : call("echo", {{"text", "ok"}});
    case 3:
      return call(alt && p == kConfidential ? "cli:db-dump" : "cli:report", Json::object());
    case 4:
      return call("delete_file", {{"path", "/tmp/scratch/old.tmp"}});
    case 5:
      return get(p == kUntrusted ? "https://paste.example.com/raw/x1"
                                 : "https://api.example.com/v1/search?q=x");
    case 6:
      return read(p == kSecret ? "/srv/secrets/deploy.pem" : "/home/u/notes/plan.md");
    case 7:
      return call("execute_command", {{"command", "git log"}});
    case 8:
      return call(p == kConfidential ? "cli:db-dump" : "cli:report", Json::object());
    default:
      return call("write_file", {{"path", "notes/draft.txt"}, {"content", "x"}});
  }
}

// Folds `sessions` sessions ("s0", ... as the timed requests name them) of
// `calls` completed calls each into `facts`, as the decide stage folds the
// log: each call's decision.made (allow, with the invocation and subject
// the engine gives it) then its execution.completed, sessions interleaved
// in seq order. A session's last call completed 20 s (plus 1 s per
// session) before kT0.
void FoldSessions(const PolicyInForce& pif, const BudgetLedger& ledger, size_t sessions, size_t calls,
                  SessionFacts* facts) {
  Event made[kProfiles][kVariants][10], done[kProfiles][kVariants][10];  // by profile, variant, slot
  Decision d;
  for (int p = 0; p < kProfiles; ++p) {
    for (int v = 0; v < kVariants; ++v) {
      for (size_t slot = 0; slot < 10; ++slot) {
        const Json req = HistoryCall(static_cast<Profile>(p), v, slot);
        DecideInto(pif, ledger, DecideInput{&req, kT0}, &d);
        Event& m = made[p][v][slot];
        Event& e = done[p][v][slot];
        m.type = ev::kDecisionMade;
        e.type = ev::kExecutionCompleted;
        m.org_id = e.org_id = "acme";
        m.agent_id = e.agent_id = "agent-1";
        m.tool = e.tool = req["tool"].get<std::string>();
        m.data = {{"verdict", "allow"}, {"invocation", d.invocation}, {"subject", d.subject}};
      }
    }
  }
  uint64_t seq = 0;
  for (size_t c = 0; c < calls; ++c) {
    const int v = c + kRecentCalls >= calls ? 2 : static_cast<int>(c / 10 % 2);
    for (size_t j = 0; j < sessions; ++j) {
      Event& m = made[ProfileOf(j)][v][c % 10];
      Event& e = done[ProfileOf(j)][v][c % 10];
      m.session_id = e.session_id = "s" + std::to_string(j);
      m.request_id = e.request_id = m.session_id + "-" + std::to_string(c);
      e.time_us = kT0 - static_cast<int64_t>(calls - c) * kCallGapUs - static_cast<int64_t>(j) * 1'000'000;
      m.time_us = e.time_us - 1'000'000;
      m.seq = ++seq;
      e.seq = ++seq;
      facts->Apply(pif, m);
      facts->Apply(pif, e);
    }
  }
}

struct HistoryRun {
  Lat lat;
  Lat plain;  // the same requests under the same policy without history, in alternating rounds
  size_t sessions = 0, calls = 0;
  double fold_s = 0;
  double decided_share = 0;  // of the timed requests, decided by a history rule
};

// Times `n` decisions under the history policy, MakeRequests' mix spread
// over the folded sessions (the request's kind and the session's profile
// uncorrelated: session (7r + r/8) mod sessions for request r).
Status TimeHistory(const PolicyInForce& plain, const BudgetLedger& ledger, const std::vector<Json>& base,
                   bool quick, size_t n, HistoryRun* out) {
  Json doc = MakePolicy(100);
  doc["labels"] = HistoryLabels();
  for (auto& r : HistoryRules()) doc["rules"].push_back(std::move(r));
  PolicyPtr p;
  Status s = LoadPolicyJson(doc, "bench", &p);
  if (!s.ok()) return s;
  PolicyInForce pif;
  pif.SetFile(p);
  out->sessions = quick ? 20 : 200;
  out->calls = quick ? 300 : 1000;
  SessionFacts facts;
  auto t0 = Clock::now();
  FoldSessions(pif, ledger, out->sessions, out->calls, &facts);
  out->fold_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<Json> reqs;
  for (size_t r = 0; r < 8 * base.size(); ++r) {
    Json q = base[r % base.size()];
    q["request_id"] = "q" + std::to_string(r);
    q["session_id"] = "s" + std::to_string((r * 7 + r / 8) % out->sessions);
    reqs.push_back(std::move(q));
  }
  Decision d;
  size_t decided = 0;
  for (const Json& q : reqs) {
    DecideInput in{&q, kT0};
    in.facts = &facts;
    DecideInto(pif, ledger, in, &d);
    if (!d.history.rule.empty()) ++decided;
  }
  out->decided_share = static_cast<double>(decided) / static_cast<double>(reqs.size());
  std::cerr << "bench decide: history: " << out->sessions << " sessions of " << out->calls
            << " calls folded in " << out->fold_s << " s; " << decided << " of " << reqs.size()
            << " requests decided by a history rule\n";
  // Five alternating rounds of the plain 100-rule policy and the history
  // policy over these same requests: the machine's drift hits both alike.
  std::vector<double> with, without;
  for (int round = 0; round < 5; ++round) {
    TimeDecisions(plain, ledger, reqs, n / 5, false, nullptr, &without);
    TimeDecisions(pif, ledger, reqs, n / 5, false, &facts, &with);
  }
  out->lat = Percentiles(with);
  out->plain = Percentiles(without);
  return Status::Ok();
}

// Baseline: std::regex over the 100-rule policy's glob list (deny then
// allow), matching the requests' invocations; calls per second.
double RegexBaselinePerS(const PolicyInForce& pif, const std::vector<Json>& reqs, size_t n) {
  std::vector<std::regex> regexes;
  const Json doc = pif.file()->doc();
  for (const char* list : {"deny", "allow"}) {
    for (const auto& g : doc[list]) regexes.emplace_back(GlobToRegex(g.get<std::string>()));
  }
  std::vector<std::string> invocations;
  for (const auto& r : reqs) invocations.push_back(InvocationOf(pif.file().get(), r));
  const size_t nb = std::max<size_t>(n / 20, 200);
  size_t matched = 0;
  auto t0 = Clock::now();
  for (size_t i = 0; i < nb; ++i) {
    const std::string& inv = invocations[i % invocations.size()];
    for (const auto& re : regexes) {
      if (std::regex_match(inv, re)) {
        ++matched;
        break;
      }
    }
  }
  const double per_s = static_cast<double>(nb) / std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << "bench decide: regex baseline matched " << matched << " of " << nb << "\n";
  return per_s;
}

}  // namespace

Json RunDecideBench(const DecideBenchOptions& o) {
  const size_t n = o.quick ? 5000 : o.decisions;
  Json result;
  PolicyInForce pif[2];
  std::vector<Json> reqs[2];
  BudgetLedger ledger;
  const size_t sizes[2] = {100, 1000};
  for (int k = 0; k < 2; ++k) {
    Json doc = MakePolicy(sizes[k]);
    PolicyPtr p;
    Status s = LoadPolicyJson(doc, "bench", &p);
    if (!s.ok()) return {{"error", s.ToString()}};
    pif[k].SetFile(p);
    reqs[k] = MakeRequests(doc["orgs"]["acme"]["agents"].size());
  }
  // A ledger with history: 5,000 settled calls over the past day.
  for (int i = 0; i < 5000; ++i) {
    Json r = {{"org_id", "acme"},
              {"agent_id", "agent-" + std::to_string(i % 10)},
              {"session_id", "s" + std::to_string(i % 50)},
              {"tool", "echo"}};
    Json d = {{"verdict", "allow"},
              {"reservation", {{"usd", 0.01}, {"received_at", FormatTime(kT0 - int64_t{i} * 17'000'000)}}}};
    ledger.ApplyDecision("h" + std::to_string(i), r, d);
  }
  std::cerr << "bench decide: " << n << " decisions per policy size\n";
  Lat l100 = TimeDecisions(pif[0], ledger, reqs[0], n, false);
  Lat l1000 = TimeDecisions(pif[1], ledger, reqs[1], n, false);
  Lat lj = TimeDecisions(pif[0], ledger, reqs[0], n / 2, true);

  // The 100-rule policy with 100 org sections (docs/policy.md,
  // "Organisations"), the requests spread over 200 orgs: half of them
  // decided under their org's own compiled policy, half under the
  // defaults. The hot path only looks the org up.
  Lat lorgs;
  {
    Json doc = MakePolicy(sizes[0]);
    const Json agents = doc["orgs"]["acme"]["agents"];
    Json orgs = Json::object();
    for (int i = 0; i < 100; ++i) {
      orgs["org-" + std::to_string(i)] = {{"deny", {"cli:org" + std::to_string(i) + "-forbidden*"}},
                                          {"mode", i % 2 ? "ask" : "restrict"},
                                          {"agents", agents}};
    }
    doc["orgs"] = std::move(orgs);
    PolicyPtr p;
    Status s = LoadPolicyJson(doc, "bench", &p);
    if (!s.ok()) return {{"error", s.ToString()}};
    PolicyInForce with_orgs;
    with_orgs.SetFile(p);
    std::vector<Json> spread = reqs[0];
    for (size_t i = 0; i < spread.size(); ++i) spread[i]["org_id"] = "org-" + std::to_string(i * 7 % 200);
    lorgs = TimeDecisions(with_orgs, ledger, spread, n, false);
  }

  // The 100-rule policy with 20 history rules, over sessions of 1,000
  // completed calls (docs/policy.md, "History").
  HistoryRun hist;
  Status hs = TimeHistory(pif[0], ledger, reqs[0], o.quick, n, &hist);
  if (!hs.ok()) return {{"error", hs.ToString()}};

  const double baseline_per_s = RegexBaselinePerS(pif[0], reqs[0], n);

  result["p50_us"] = l100.p50;
  result["p99_us"] = l100.p99;
  result["p50_us_1000"] = l1000.p50;
  result["p99_us_1000"] = l1000.p99;
  result["growth_10x"] = l1000.p50 / l100.p50;
  result["p50_us_orgs"] = lorgs.p50;
  result["p99_us_orgs"] = lorgs.p99;
  result["p50_us_history"] = hist.lat.p50;
  result["p99_us_history"] = hist.lat.p99;
  result["p50_us_history_plain"] = hist.plain.p50;
  result["p99_us_history_plain"] = hist.plain.p99;
  result["history_vs_plain_p50"] = hist.lat.p50 / hist.plain.p50;
  result["history_decided_share"] = hist.decided_share;
  result["history_sessions"] = hist.sessions;
  result["history_calls_per_session"] = hist.calls;
  result["history_fold_s"] = hist.fold_s;
  result["p50_json_us"] = lj.p50;
  result["p99_json_us"] = lj.p99;
  result["decisions_per_s"] = l100.per_s;
  result["regex_baseline_per_s"] = baseline_per_s;
  result["decide_vs_baseline"] = l100.per_s / baseline_per_s;
  result["vs_cedar_p50"] = 4.0 / l100.p50;
  result["vs_opa"] = 36.0 / l100.p50;
  result["rules"] = {100, 1000};
  result["decisions"] = n;
  result["goals"] = {
      {"p50_us", 2}, {"p99_us", 20}, {"growth_10x", 1.5}, {"p50_us_history", 2}, {"p99_us_history", 20}};
  result["met"] = {{"p50_us", l100.p50 <= 2},
                   {"p99_us", l100.p99 <= 20},
                   {"p50_us_history", hist.lat.p50 <= 2},
                   {"p99_us_history", hist.lat.p99 <= 20},
                   {"growth_10x", result["growth_10x"].get<double>() <= 1.5}};
  return result;
}

}  // namespace tollgate::bench
