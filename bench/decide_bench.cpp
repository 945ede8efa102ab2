#include "bench/decide_bench.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <regex>

#include "decide/policy_engine.h"

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

Lat TimeDecisions(const PolicyInForce& pif, const BudgetLedger& ledger, const std::vector<Json>& reqs,
                  size_t n, bool json) {
  std::vector<double> ns;
  ns.reserve(n);
  Decision d;
  size_t sink = 0;
  for (size_t i = 0; i < std::min<size_t>(n / 10 + 1, 2000); ++i) {  // warm up
    DecideInto(pif, ledger, DecideInput{&reqs[i % reqs.size()], kT0}, &d);
  }
  auto start = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    const Json& r = reqs[i % reqs.size()];
    auto t0 = Clock::now();
    if (json) {
      Json j = Decide(pif, ledger, DecideInput{&r, kT0 + static_cast<int64_t>(i)});
      sink += j.size();
    } else {
      DecideInto(pif, ledger, DecideInput{&r, kT0 + static_cast<int64_t>(i)}, &d);
      sink += d.verdict.size();
    }
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(ns.begin(), ns.end());
  Lat l;
  l.p50 = ns[ns.size() / 2] / 1000;
  l.p99 = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)] / 1000;
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

  // Baseline: std::regex over the same 100-rule glob list (deny then allow).
  std::vector<std::regex> regexes;
  const Json doc = pif[0].file()->doc();
  for (const char* list : {"deny", "allow"}) {
    for (const auto& g : doc[list]) regexes.emplace_back(GlobToRegex(g.get<std::string>()));
  }
  std::vector<std::string> invocations;
  for (const auto& r : reqs[0]) invocations.push_back(InvocationOf(pif[0].file().get(), r));
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
  const double baseline_per_s =
      static_cast<double>(nb) / std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << "bench decide: regex baseline matched " << matched << " of " << nb << "\n";

  result["p50_us"] = l100.p50;
  result["p99_us"] = l100.p99;
  result["p50_us_1000"] = l1000.p50;
  result["p99_us_1000"] = l1000.p99;
  result["growth_10x"] = l1000.p50 / l100.p50;
  result["p50_us_orgs"] = lorgs.p50;
  result["p99_us_orgs"] = lorgs.p99;
  result["p50_json_us"] = lj.p50;
  result["p99_json_us"] = lj.p99;
  result["decisions_per_s"] = l100.per_s;
  result["regex_baseline_per_s"] = baseline_per_s;
  result["decide_vs_baseline"] = l100.per_s / baseline_per_s;
  result["vs_cedar_p50"] = 4.0 / l100.p50;
  result["vs_opa"] = 36.0 / l100.p50;
  result["rules"] = {100, 1000};
  result["decisions"] = n;
  result["goals"] = {{"p50_us", 2}, {"p99_us", 20}, {"growth_10x", 1.5}};
  result["met"] = {{"p50_us", l100.p50 <= 2},
                   {"p99_us", l100.p99 <= 20},
                   {"growth_10x", result["growth_10x"].get<double>() <= 1.5}};
  return result;
}

}  // namespace tollgate::bench
