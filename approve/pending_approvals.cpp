#include "approve/pending_approvals.h"

#include <algorithm>

#include "core/messages.h"

namespace tollgate {
namespace {

// request.rejected that ends a received request (RequestState).
bool EndsRequest(const Event& e) {
  auto err = e.data.find("error");
  if (err == e.data.end() || !err->is_object()) return false;
  const std::string code = err->value("code", "");
  return code == errc::kRequestLost || code == errc::kOutputTooLarge;
}

int ApproversNeeded(const Json& data) {
  auto n = data.find("approvers_needed");
  return n != data.end() && n->is_number_integer() ? std::max(1, n->get<int>()) : 1;
}

}  // namespace

void PendingApprovals::Erase(const std::string& key) {
  auto it = held_.find(key);
  if (it == held_.end()) return;
  auto n = per_agent_.find({it->second.org_id, it->second.agent_id});
  if (n != per_agent_.end() && --n->second == 0) per_agent_.erase(n);
  held_.erase(it);
}

void PendingApprovals::Finish(const std::string& key) {
  Erase(key);
  finished_.insert(key);
}

size_t PendingApprovals::HeldBy(const std::string& org_id, const std::string& agent_id) const {
  auto n = per_agent_.find({org_id, agent_id});
  return n == per_agent_.end() ? 0 : n->second;
}

void PendingApprovals::Apply(const Event& e) {
  const bool approval = e.type == ev::kApprovalRequested || e.type == ev::kApprovalGranted ||
                        e.type == ev::kApprovalDenied || e.type == ev::kApprovalExpired;
  if (!approval && e.type != ev::kRequestRejected && e.type != ev::kExecutionCompleted) return;
  const std::string key = RequestKey(e.org_id, e.request_id);
  if (finished_.count(key)) return;
  auto it = held_.find(key);
  if (e.type == ev::kApprovalRequested) {
    if (it == held_.end()) ++per_agent_[{e.org_id, e.agent_id}];
    Held& h = held_[key];
    h.org_id = e.org_id;
    h.request_id = e.request_id;
    h.agent_id = e.agent_id;
    h.deadline_us = 0;
    ParseTime(e.data.value("deadline", ""), &h.deadline_us);
    h.needed = ApproversNeeded(e.data);
  } else if (e.type == ev::kApprovalGranted) {
    // A grant with no request settles at once (a quorum of one), as
    // RequestState counts it.
    if (it == held_.end()) {
      Finish(key);
      return;
    }
    Held& h = it->second;
    const std::string who = e.data.value("approver", "");
    if (std::find(h.granted_by.begin(), h.granted_by.end(), who) == h.granted_by.end())
      h.granted_by.push_back(who);
    if (static_cast<int>(h.granted_by.size()) >= h.needed) Finish(key);
  } else if (approval) {
    Finish(key);  // denied or expired
  } else if (it != held_.end() && (e.type == ev::kExecutionCompleted || EndsRequest(e))) {
    Finish(key);
  }
}

void PendingApprovals::Forget(const std::string& org_id, const std::string& request_id) {
  Erase(RequestKey(org_id, request_id));
}

const PendingApprovals::Held* PendingApprovals::Find(const std::string& org_id,
                                                     const std::string& request_id) const {
  auto it = held_.find(RequestKey(org_id, request_id));
  return it == held_.end() ? nullptr : &it->second;
}

bool PendingApprovals::finished(const std::string& org_id, const std::string& request_id) const {
  return finished_.count(RequestKey(org_id, request_id));
}

int64_t PendingApprovals::next_deadline_us() const {
  int64_t best = 0;
  for (const auto& [key, h] : held_) {
    if (best == 0 || h.deadline_us < best) best = h.deadline_us;
  }
  return best;
}

std::vector<std::pair<std::string, std::string>> PendingApprovals::Due(int64_t now_us) const {
  std::vector<std::pair<std::string, std::string>> due;
  for (const auto& [key, h] : held_) {
    if (h.deadline_us <= now_us) due.emplace_back(h.org_id, h.request_id);
  }
  return due;
}

}  // namespace tollgate
