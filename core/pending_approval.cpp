#include "core/pending_approval.h"

namespace tollgate {

Json PendingApproval::ToJson() const {
  return Json{{"request_id", request_id},
              {"org_id", org_id},
              {"agent_id", agent_id},
              {"session_id", session_id},
              {"tool", tool},
              {"args_hash", args_hash},
              {"approvers_needed", approvers_needed},
              {"approvers", approvers},
              {"granted_by", granted_by},
              {"deadline", FormatTime(deadline_us)},
              {"requested_at", FormatTime(requested_us)},
              {"requested_seq", requested_seq},
              {"decision", decision},
              {"request", request}};
}

bool PendingFromState(const RequestState& st, PendingApproval* out) {
  if (!st.approval_pending()) return false;
  const Event& e = *st.approval_requested;
  PendingApproval p;
  p.request_id = e.request_id;
  p.org_id = e.org_id;
  p.agent_id = e.agent_id;
  p.session_id = e.session_id;
  p.tool = e.tool;
  p.args_hash = e.data.value("args_hash", "");
  p.approvers_needed = st.approvers_needed;
  if (auto a = e.data.find("approvers"); a != e.data.end() && a->is_array()) {
    for (const auto& x : *a) {
      if (x.is_string()) p.approvers.push_back(x.get<std::string>());
    }
  }
  for (const Event* g : st.grants) p.granted_by.push_back(g->data.value("approver", ""));
  ParseTime(e.data.value("deadline", ""), &p.deadline_us);
  p.requested_us = e.time_us;
  p.requested_seq = e.seq;
  if (st.decision) {
    p.decision = WithoutProvenance(st.decision->data);
  }
  if (st.received) p.request = st.received->data.value("request", Json::object());
  *out = std::move(p);
  return true;
}

}  // namespace tollgate
