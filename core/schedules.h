// Scheduled calls (Duragent's `schedule` built-in), as a fold over the log.
//
// There is no event type of their own: a schedule IS the
// execution.completed of a successful `schedule create` call (its
// result.data holds schedule_id, due_at, tool, args), and a cancellation is
// the execution.completed of a successful `schedule cancel` of the same
// (org, agent). So both are replayable, redacted and chained like any call.
// A schedule has fired once the log holds a request.received of its fire
// request (FireRequestIdOf) in its org, the request the scheduler
// (deploy/scheduler.h) publishes at due time, or a request.rejected of it
// for any reason but E_SCHEDULE_UNPROVEN (which turns away a claim the log
// does not bear out, e.g. the agent's own forgery, and ends nothing).
//
// Ids are deterministic, so a fire published twice (after a crash) is one
// request that ingest de-duplicates:
//   schedule_id = "sch-" + 24 hex of SHA-256(org NUL create request_id)
//   fire request_id = "fire-" + schedule_id
// Ingest believes a request that claims to be a fire (that request_id
// form, or metadata.scheduled_by) only as far as the log bears it out
// (CheckScheduledRequest). Pure; not synchronised.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate {

inline constexpr const char* kScheduleTool = "schedule";
// How far ahead a call may be scheduled (the schema's delay_seconds maximum).
inline constexpr int64_t kMaxScheduleAheadUs = 2'592'000LL * 1'000'000;
// A cancel is refused this close to the due time: the scheduler must have
// folded a cancel before it fires, and this is its margin (docs/tools.md).
inline constexpr int64_t kCancelCutoffUs = 2'000'000;
// Ingest accepts a fire this much before its due time (clock skew between
// the keeper and an ingest process), never earlier.
inline constexpr int64_t kFireEarlyUs = 5'000'000;
// Pending schedules per agent: a create past this is refused.
inline constexpr size_t kMaxPendingPerAgent = 100;

namespace errc {
// cancel: no such schedule of this agent (another agent's reads the same).
inline constexpr const char* kScheduleNotFound = "E_SCHEDULE_NOT_FOUND";
// cancel: it fired, was cancelled, or fires within kCancelCutoffUs.
inline constexpr const char* kScheduleDone = "E_SCHEDULE_DONE";
// create: kMaxPendingPerAgent reached.
inline constexpr const char* kScheduleLimit = "E_SCHEDULE_LIMIT";
// ingest: a request claims to be a scheduled call and the log does not
// hold that schedule's successful create with the same call.
inline constexpr const char* kScheduleUnproven = "E_SCHEDULE_UNPROVEN";
// ingest: the fire of a schedule whose args held secrets, redacted in the
// log, which therefore cannot be made (it ends the schedule as fired).
inline constexpr const char* kScheduleSecrets = "E_SCHEDULE_SECRETS";
}  // namespace errc

std::string ScheduleIdOf(const std::string& org_id, const std::string& create_request_id);
std::string FireRequestIdOf(const std::string& schedule_id);
// The schedule a fire request_id names; "" when `request_id` is not one.
std::string ScheduleOfFireRequest(const std::string& request_id);

struct ScheduleEntry {
  enum class State { kScheduled, kFired, kCancelled };
  std::string schedule_id, org_id, agent_id, session_id;
  std::string create_request_id;
  std::string tool, tool_action, description;
  Json args = Json::object();  // as logged (secrets redacted)
  int64_t due_us = 0;
  State state = State::kScheduled;
  std::string cancelled_by;  // the cancel call's request_id
  uint64_t seq = 0;          // of the create's execution.completed

  // {schedule_id, status, due_at, tool, args, session_id, created_by,
  // tool_action?, description?, fired_request_id?, cancelled_by?}
  Json ToJson() const;
};
const char* StateName(ScheduleEntry::State s);

class ScheduleBook {
 public:
  // Folds one event; true when it changed a schedule. Anything else (other
  // tools, failed calls, a cancel of another agent's schedule or of a
  // fired one, an unknown schedule) changes nothing.
  bool Apply(const Event& e);
  const ScheduleEntry* Find(const std::string& schedule_id) const;
  // Drops a schedule's args and description, keeping its state (the
  // scheduler, which needs neither, keeps every id: a create re-seen after
  // a crash must not bring a cancelled schedule back).
  void Trim(const std::string& schedule_id);
  // The (org, agent)'s schedules in creation order.
  std::vector<const ScheduleEntry*> OfAgent(const std::string& org_id, const std::string& agent_id) const;
  size_t size() const { return by_id_.size(); }

 private:
  std::map<std::string, ScheduleEntry> by_id_;
};

// Whether `request` (a tool_request body) claims to be a scheduled call.
bool ClaimsScheduled(const Json& request, const std::string& request_id);
// The create request a claimed fire names (metadata.schedule_request_id), "" if none.
std::string CreateRequestNamedBy(const Json& request);
// Ingest's check of a claimed fire: `request` (authenticated: its org and
// agent are the signer's) with `request_id`, against `create_events`, the
// log's events of the create request it names. Ok when the create
// succeeded for the same org, agent and session, its schedule_id and fire
// id are the claimed ones, tool, args and action are the create's as
// logged, and now_us is no earlier than due - kFireEarlyUs. Else
// E_SCHEDULE_UNPROVEN saying why; E_SCHEDULE_SECRETS when all that holds
// but the scheduled args held secrets, which the log keeps redacted.
Status CheckScheduledRequest(const Json& request, const std::string& request_id,
                             const std::vector<Event>& create_events, int64_t now_us);

}  // namespace tollgate
