#include "audit/log_history.h"

#include "audit/approvals.h"

namespace tollgate {

Status StoreHistory::ForEachOpenApprovalEvent(const std::function<void(const Event&)>& visit) const {
  return ApprovalEvents(log_.store())(visit);
}

}  // namespace tollgate
