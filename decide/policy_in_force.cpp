// The policy in force: the file policy plus the agent-local tier
// (decide/policy_in_force.h; docs/policy.md, "Versions").
#include "decide/policy_in_force.h"

#include <algorithm>
#include <set>

#include "core/sha256.h"

namespace tollgate {

struct PolicyInForce::Local {
  std::vector<std::string> patterns;  // in force, in the order they were added
  GlobSet allow;                      // patterns, compiled
  std::set<std::string> hashes;       // content hashes folded in (grants and revocations)
};

PolicyInForce::PolicyInForce() = default;
PolicyInForce::~PolicyInForce() = default;
PolicyInForce::PolicyInForce(const PolicyInForce&) = default;
PolicyInForce& PolicyInForce::operator=(const PolicyInForce&) = default;

void PolicyInForce::SetFile(PolicyPtr p) {
  file_ = std::move(p);
  Reversion();
}

namespace {
// "+local:<16 hex>" over agent-local content hashes, "" for none.
std::string LocalSuffix(std::vector<std::string> hashes) {
  if (hashes.empty()) return "";
  std::sort(hashes.begin(), hashes.end());
  std::string joined;
  for (const auto& h : hashes) joined += h + "\n";
  return "+local:" + Sha256Hex(joined).substr(0, 16);
}
}  // namespace

void PolicyInForce::Reversion() {
  org_versions_.clear();
  if (file_ == nullptr) {
    version_.clear();
    default_version_.clear();
    return;
  }
  // Each org's version: its own effective policy and its own agent-local
  // rules, nothing of another org's.
  std::map<std::string, std::vector<std::string>> by_org;
  std::vector<std::string> all;
  for (const auto& [k, l] : local_) {
    std::vector<std::string>& mine = by_org[k.substr(0, k.find('\0'))];
    mine.insert(mine.end(), l->hashes.begin(), l->hashes.end());
    all.insert(all.end(), l->hashes.begin(), l->hashes.end());
  }
  version_ = file_->version() + LocalSuffix(std::move(all));
  default_version_ = file_->default_version_;
  for (const auto& [org, form] : file_->orgs_) org_versions_[org] = form.version;
  for (auto& [org, hashes] : by_org)
    org_versions_[org] = file_->version(org) + LocalSuffix(std::move(hashes));
}

Status PolicyInForce::AddAgentLocal(const std::string& org_id, const std::string& agent_id,
                                    const std::vector<std::string>& allow, const std::string& content_hash,
                                    const std::vector<std::string>& revoke) {
  std::string key = org_id + '\0' + agent_id;
  auto it = local_.find(key);
  if (it != local_.end() && it->second->hashes.count(content_hash) != 0) return Status::Ok();  // idempotent
  auto l = it == local_.end() ? std::make_shared<Local>() : std::make_shared<Local>(*it->second);
  for (const auto& a : allow) {
    if (std::find(l->patterns.begin(), l->patterns.end(), a) == l->patterns.end()) l->patterns.push_back(a);
  }
  for (const auto& r : revoke)
    l->patterns.erase(std::remove(l->patterns.begin(), l->patterns.end(), r), l->patterns.end());
  l->allow = GlobSet();
  for (const auto& a : l->patterns) {
    std::string err;
    if (!l->allow.Add(a, &err)) return Status::Error(errc::kPolicyInvalid, "agent-local rule: " + err);
  }
  l->hashes.insert(content_hash);
  local_[key] = std::move(l);
  Reversion();
  return Status::Ok();
}

std::vector<std::string> PolicyInForce::AgentLocalPatterns(const std::string& org_id,
                                                           const std::string& agent_id) const {
  auto it = local_.find(org_id + '\0' + agent_id);
  return it == local_.end() ? std::vector<std::string>{} : it->second->patterns;
}

Status PolicyInForce::Apply(const Event& e) {
  if (e.type != ev::kPolicyUpdated) return Status::Ok();
  const Json& d = e.data;
  std::string tier = d.value("tier", "file");
  if (tier == "agent_local") {
    std::vector<std::string> allow, revoke;
    for (const auto& [key, out] : {std::pair{"allow", &allow}, std::pair{"revoke", &revoke}}) {
      if (d.contains(key) && d[key].is_array()) {
        for (const auto& a : d[key])
          if (a.is_string()) out->push_back(a.get<std::string>());
      }
    }
    std::string org = d.value("org_id", e.org_id), agent = d.value("agent_id", e.agent_id);
    return AddAgentLocal(org, agent, allow, d.value("content_hash", ""), revoke);
  }
  if (!d.contains("policy")) return Status::Ok();  // a pre-policy-engine event: nothing to load
  if (file_ != nullptr && file_->content_hash() == d.value("content_hash", "")) return Status::Ok();
  PolicyPtr p;
  Status s = LoadPolicyJson(d["policy"], d.value("source", ""), &p);
  if (!s.ok()) return s;
  SetFile(std::move(p));
  return Status::Ok();
}

const GlobSet* PolicyInForce::AgentLocal(const std::string& org_id, const std::string& agent_id) const {
  if (local_.empty()) return nullptr;
  auto it = local_.find(org_id + '\0' + agent_id);
  return it == local_.end() || it->second->patterns.empty() ? nullptr : &it->second->allow;
}

}  // namespace tollgate
