#include "core/schedules.h"

#include <algorithm>

#include "core/request_state.h"
#include "core/sha256.h"

namespace tollgate {
namespace {

constexpr std::string_view kFirePrefix = "fire-";
constexpr std::string_view kSchedulePrefix = "sch-";

// The result data of a successful call of the schedule tool, or null.
const Json* SuccessData(const Event& e) {
  if (e.type != ev::kExecutionCompleted || e.tool != kScheduleTool) return nullptr;
  auto r = e.data.find("result");
  if (r == e.data.end() || !r->is_object() || !r->value("success", false)) return nullptr;
  auto d = r->find("data");
  return d != r->end() && d->is_object() ? &*d : nullptr;
}

std::string Str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status Unproven(const std::string& why) {
  return Status::Error(errc::kScheduleUnproven, "not a scheduled call the log bears out: " + why);
}

}  // namespace

std::string ScheduleIdOf(const std::string& org_id, const std::string& create_request_id) {
  std::string in = org_id;
  in.push_back('\0');
  in += create_request_id;
  return std::string(kSchedulePrefix) + Sha256Hex(in).substr(0, 24);
}

std::string FireRequestIdOf(const std::string& schedule_id) { return std::string(kFirePrefix) + schedule_id; }

std::string ScheduleOfFireRequest(const std::string& request_id) {
  std::string_view r(request_id);
  if (!r.starts_with(kFirePrefix)) return "";
  r.remove_prefix(kFirePrefix.size());
  return r.starts_with(kSchedulePrefix) ? std::string(r) : std::string();
}

const char* StateName(ScheduleEntry::State s) {
  switch (s) {
    case ScheduleEntry::State::kFired:
      return "fired";
    case ScheduleEntry::State::kCancelled:
      return "cancelled";
    default:
      return "scheduled";
  }
}

Json ScheduleEntry::ToJson() const {
  Json j{{"schedule_id", schedule_id},
         {"status", StateName(state)},
         {"due_at", FormatTime(due_us)},
         {"tool", tool},
         {"args", args},
         {"session_id", session_id},
         {"created_by", create_request_id}};
  if (!tool_action.empty()) j["tool_action"] = tool_action;
  if (!description.empty()) j["description"] = description;
  if (state == State::kFired) j["fired_request_id"] = FireRequestIdOf(schedule_id);
  if (state == State::kCancelled) j["cancelled_by"] = cancelled_by;
  return j;
}

bool ScheduleBook::Apply(const Event& e) {
  if (e.type == ev::kRequestReceived || e.type == ev::kRequestRejected) {
    if (e.type == ev::kRequestRejected) {
      auto err = e.data.find("error");
      if (err == e.data.end() || !err->is_object() || err->value("code", "") == errc::kScheduleUnproven)
        return false;
    }
    const std::string id = ScheduleOfFireRequest(e.request_id);
    auto it = id.empty() ? by_id_.end() : by_id_.find(id);
    // A fire that got in despite a cancel (a race the cutoff should rule
    // out) still ran: the log's truth is "fired".
    if (it == by_id_.end() || it->second.org_id != e.org_id ||
        it->second.state == ScheduleEntry::State::kFired) {
      return false;
    }
    it->second.state = ScheduleEntry::State::kFired;
    return true;
  }
  const Json* d = SuccessData(e);
  if (d == nullptr) return false;
  const std::string action = Str(*d, "action");
  const std::string id = Str(*d, "schedule_id");
  if (action == "create") {
    // The id is the create's own: a result naming another is not a schedule.
    if (id != ScheduleIdOf(e.org_id, e.request_id) || by_id_.count(id) != 0) return false;
    ScheduleEntry s;
    if (!ParseTime(Str(*d, "due_at"), &s.due_us) || Str(*d, "tool").empty()) return false;
    s.schedule_id = id;
    s.org_id = e.org_id;
    s.agent_id = e.agent_id;
    s.session_id = e.session_id;
    s.create_request_id = e.request_id;
    s.tool = Str(*d, "tool");
    s.tool_action = Str(*d, "tool_action");
    s.description = Str(*d, "description");
    if (auto a = d->find("args"); a != d->end() && a->is_object()) s.args = *a;
    s.seq = e.seq;
    by_id_.emplace(id, std::move(s));
    return true;
  }
  if (action == "cancel") {
    auto it = by_id_.find(id);
    // Only the agent's own, only while it has not fired.
    if (it == by_id_.end() || it->second.org_id != e.org_id || it->second.agent_id != e.agent_id ||
        it->second.state != ScheduleEntry::State::kScheduled) {
      return false;
    }
    it->second.state = ScheduleEntry::State::kCancelled;
    it->second.cancelled_by = e.request_id;
    return true;
  }
  return false;
}

void ScheduleBook::Trim(const std::string& schedule_id) {
  auto it = by_id_.find(schedule_id);
  if (it == by_id_.end()) return;
  it->second.args = Json::object();
  it->second.description.clear();
}

const ScheduleEntry* ScheduleBook::Find(const std::string& schedule_id) const {
  auto it = by_id_.find(schedule_id);
  return it == by_id_.end() ? nullptr : &it->second;
}

std::vector<const ScheduleEntry*> ScheduleBook::OfAgent(const std::string& org_id,
                                                        const std::string& agent_id) const {
  std::vector<const ScheduleEntry*> out;
  for (const auto& [id, s] : by_id_) {
    if (s.org_id == org_id && s.agent_id == agent_id) out.push_back(&s);
  }
  std::sort(out.begin(), out.end(),
            [](const ScheduleEntry* a, const ScheduleEntry* b) { return a->seq < b->seq; });
  return out;
}

bool ClaimsScheduled(const Json& request, const std::string& request_id) {
  if (request_id.starts_with(kFirePrefix)) return true;
  auto m = request.find("metadata");
  return m != request.end() && m->is_object() && m->contains("scheduled_by");
}

std::string CreateRequestNamedBy(const Json& request) {
  auto m = request.find("metadata");
  if (m == request.end() || !m->is_object()) return "";
  const std::string rid = Str(*m, "schedule_request_id");
  return rid.size() <= kMaxIdBytes ? rid : "";
}

Status CheckScheduledRequest(const Json& request, const std::string& request_id,
                             const std::vector<Event>& create_events, int64_t now_us) {
  auto m = request.find("metadata");
  if (m == request.end() || !m->is_object()) return Unproven("metadata.scheduled_by is missing");
  const std::string sid = Str(*m, "scheduled_by");
  const std::string create_rid = CreateRequestNamedBy(request);
  const std::string org = Str(request, "org_id");
  if (sid.empty() || create_rid.empty()) {
    return Unproven("metadata.scheduled_by and metadata.schedule_request_id must name the schedule");
  }
  if (sid != ScheduleIdOf(org, create_rid) || request_id != FireRequestIdOf(sid)) {
    return Unproven("its request_id, schedule and create request do not belong together");
  }
  RequestState st = Summarize(create_events);
  if (st.received == nullptr || st.completed == nullptr) return Unproven("the log holds no create of " + sid);
  const Event& done = *st.completed;
  const Json* d = SuccessData(done);
  if (d == nullptr || Str(*d, "action") != "create" || Str(*d, "schedule_id") != sid) {
    return Unproven("the log holds no successful create of " + sid);
  }
  const Event& rec = *st.received;
  if (rec.agent_id != Str(request, "agent_id") || rec.session_id != Str(request, "session_id")) {
    return Unproven(sid + " belongs to another agent or session");
  }
  int64_t due = 0;
  if (!ParseTime(Str(*d, "due_at"), &due)) return Unproven(sid + " has no due time");
  if (now_us < due - kFireEarlyUs) return Unproven(sid + " is not due before " + FormatTime(due));
  const Json create_args = rec.data.value("request", Json::object()).value("args", Json::object());
  const Json want_args = create_args.value("args", Json::object());
  const std::string want_action = Str(create_args, "tool_action");
  if (Str(request, "tool") != Str(create_args, "tool") ||
      request.value("args", Json::object()) != want_args || Str(request, "action") != want_action ||
      (request.contains("action") != !want_action.empty())) {
    return Unproven("its tool, args or action differ from those " + sid + " was created with");
  }
  if (auto red = rec.data.find("redacted"); red != rec.data.end() && red->is_array()) {
    for (const Json& p : *red) {
      if (p.is_string() && (p.get<std::string>().starts_with("/args/args") ||
                            p.get<std::string>().starts_with("/args/tool"))) {
        return Status::Error(
            errc::kScheduleSecrets,
            sid + "'s arguments held secrets, which the log keeps redacted: it cannot be made");
      }
    }
  }
  return Status::Ok();
}

}  // namespace tollgate
