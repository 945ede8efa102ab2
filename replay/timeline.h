// The timeline of an agent session: what happened to each of its requests,
// in order, as the log records it. Pure: built from events, no I/O, so the
// CLI, the HTTP API and a web timeline share it.
//
// A request's steps are its events in seq order; the timeline adds what a
// reader needs around them: the decision (verdict, rule, reason, policy
// version), the approvals (who, when, how long each waited since the
// request for approval), the execution (attempts, duration, success or
// error, cost) and the result the agent got (or "pending" when the log
// shows the request unfinished), plus the time between consecutive steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"

namespace tollgate::replay {

struct TimelineStep {
  uint64_t seq = 0;
  int64_t time_us = 0;
  std::string type;
  std::string summary;         // one line for people
  int64_t since_prev_us = 0;   // since the request's previous step (0 for its first)
  int64_t since_start_us = 0;  // since the request's first step
};

struct ApprovalStep {
  std::string type;      // approval.granted / approval.denied / approval.expired / other approval.*
  std::string approver;  // "" for expiry
  std::string scope;     // once / always, when given
  std::string comment;
  int64_t time_us = 0;
  int64_t waited_us = -1;  // since approval.requested; -1 when none was logged
};

struct RequestTimeline {
  std::string org_id;  // a request is (org, request_id): two orgs of one session id may share ids
  std::string request_id;
  std::string tool;
  std::string args_hash;
  Json request;             // as logged (secrets redacted); null when never received
  int64_t received_us = 0;  // from received_at (the time decisions use); else the first event's time
  // Decision; verdict empty when none was made.
  std::string verdict, rule, reason, policy_version, danger_level, decision_error;
  Json decision;  // the decision.made data (without source), null when none
  // Approval
  bool approval_requested = false;
  int64_t approval_requested_us = 0;
  Json approval_request;  // approval.requested data, null when none
  std::vector<ApprovalStep> approvals;
  // Execution
  int attempts = 0;
  bool executed = false;  // execution.completed seen
  double duration_ms = 0;
  double cost_usd = 0;
  bool success = false;
  std::string error_code;  // of the tool result, "" on success
  // The outcome as the agent saw it: completed, failed, denied, rejected,
  // expired, or pending (the log shows the request unfinished).
  std::string status;
  Json result;  // ResultFromLog (core/request_state.h); null while pending
  std::vector<TimelineStep> steps;
  uint64_t first_seq = 0;
};

struct SessionTimeline {
  std::string session_id;
  std::string org_id, agent_id;           // of the first event ("" when mixed is impossible to say)
  std::vector<RequestTimeline> requests;  // by first seq
  uint64_t events = 0;
  int64_t first_us = 0, last_us = 0;
  // Gaps between consecutive requests' first steps are in the requests'
  // received_us; status counts for a quick read.
  Json counts = Json::object();  // status -> n
  double cost_usd = 0;
};

// Builds the timeline from the session's events (any order; sorted by seq
// here). Events without a request id (none are expected in a session) are
// ignored.
SessionTimeline BuildTimeline(const std::string& session_id, std::vector<Event> events);

Json TimelineToJson(const SessionTimeline& t);
// A human-readable rendering: one block per request, one line per step
// with its time and the time since the previous step.
std::string FormatTimeline(const SessionTimeline& t);

// "1.2 s", "35 ms", "820 µs": a duration for people.
std::string FormatDuration(int64_t us);

}  // namespace tollgate::replay
