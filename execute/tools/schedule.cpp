// schedule {action: create|list|cancel, ...} (Duragent's): calls of this
// agent to be made later, in this session, by the scheduler
// (deploy/scheduler.h). The tool keeps no state: a successful create's
// result IS the schedule (its execution.completed, core/schedules.h), a
// successful cancel's result is the cancellation, and list and cancel read
// them back from the log through ToolContext::audit, scoped to the calling
// (org, agent) by the envelope, never by args.
//
//   create {tool, args?, tool_action?, at | delay_seconds, description?}
//     -> {action, schedule_id, due_at, tool, args, status: "scheduled", ...}
//     the due time is in the future and at most 30 days ahead; `tool` is
//     not `schedule`; args fit the tool's schema as ingest will check them.
//   list {include_done?} -> {schedules: [...], count}
//   cancel {schedule_id} -> {action, schedule_id, status: "cancelled", ...}
//     refused (E_SCHEDULE_NOT_FOUND) for a schedule this agent does not
//     have, and (E_SCHEDULE_DONE) for one fired, cancelled, or due within
//     kCancelCutoffUs: past that the scheduler may already be firing it.
#include "core/schedules.h"
#include "core/tool_args.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

// Pages of the agent's schedule calls read per list or cancel (1,000
// events each): a bound on what one call reads.
constexpr int kMaxPages = 20;

class ScheduleTool : public BuiltinTool {
 public:
  ScheduleTool() : BuiltinTool(kScheduleTool) {}

  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string action;
    if (!StringArg(args, "action", &action)) return ToolFail(errc::kInvalidArgs, "action must be a string");
    if (action == "create") return Create(args, ctx);
    if (action == "list") return List(args, ctx);
    if (action == "cancel") return Cancel(args, ctx);
    return ToolFail(errc::kInvalidArgs, "action must be create, list or cancel");
  }

 private:
  // The agent's schedules as the log has them, fired ones marked. Fills
  // *fail with a ToolResult on error.
  bool Read(const ToolContext& ctx, ScheduleBook* book, Json* fail) const {
    if (ctx.audit == nullptr) {
      *fail = ToolFail(errc::kAuditError, "the log is not readable from this executor");
      return false;
    }
    std::string cursor;
    for (int page = 0; page < kMaxPages; ++page) {
      Json q{{"org_id", ctx.org_id},
             {"agent_id", ctx.agent_id},
             {"tool", kScheduleTool},
             {"types", ev::kExecutionCompleted},
             {"limit", 1000}};
      if (!cursor.empty()) q["cursor"] = cursor;
      Json got;
      if (!Query(ctx, q, &got, fail)) return false;
      for (const Json& rec : got["events"]) {
        Event e;
        if (EventFromJson(rec, &e).ok()) book->Apply(e);
      }
      cursor = got.value("next_cursor", "");
      if (cursor.empty()) break;
    }
    // Fired: only one due by now can have been (ingest takes none earlier).
    for (const ScheduleEntry* s : book->OfAgent(ctx.org_id, ctx.agent_id)) {
      if (s->state != ScheduleEntry::State::kScheduled || s->due_us - kFireEarlyUs > ctx.now_us) continue;
      Json q{{"org_id", ctx.org_id},
             {"request_id", FireRequestIdOf(s->schedule_id)},
             {"types", "request.received,request.rejected"},
             {"limit", 1000}};
      Json got;
      if (!Query(ctx, q, &got, fail)) return false;
      for (const Json& rec : got["events"]) {
        Event e;
        if (EventFromJson(rec, &e).ok()) book->Apply(e);
      }
    }
    return true;
  }

  static bool Query(const ToolContext& ctx, const Json& q, Json* page, Json* fail) {
    Status s = ctx.audit->Query(ctx.org_id, q, page);
    if (!s.ok()) {
      *fail = ToolResultErrorAs(errc::kAuditError, s.code(), s.message(), true);
      return false;
    }
    if (!page->contains("events") || !(*page)["events"].is_array()) (*page)["events"] = Json::array();
    return true;
  }

  Json Create(const Json& args, const ToolContext& ctx) const {
    std::string tool, tool_action, at, description;
    if (!StringArg(args, "tool", &tool) || tool.empty() || tool.size() > kMaxIdBytes) {
      return ToolFail(errc::kInvalidArgs, "tool must name the tool to call");
    }
    if (CanonicalToolName(tool) == kScheduleTool) {
      return ToolFail(errc::kInvalidArgs, "a schedule cannot call schedule");
    }
    if (!StringArg(args, "tool_action", &tool_action, false) || !StringArg(args, "at", &at, false) ||
        !StringArg(args, "description", &description, false)) {
      return ToolFail(errc::kInvalidArgs, "tool_action, at and description must be strings");
    }
    Json call_args = args.value("args", Json::object());
    if (!call_args.is_object()) return ToolFail(errc::kInvalidArgs, "args must be an object");
    // The call must pass ingest when it fires: check its args now, as
    // ingest will (the action goes into args for a tool that takes one).
    Json as_sent = call_args;
    if (!tool_action.empty() && ToolTakesAction(CanonicalToolName(tool))) as_sent["action"] = tool_action;
    if (Status s = CheckToolArgs(CanonicalToolName(tool), as_sent); !s.ok()) {
      return ToolFail(s.code(), "the scheduled call's args: " + s.message());
    }
    const bool has_delay = args.contains("delay_seconds");
    if (has_delay == !at.empty())
      return ToolFail(errc::kInvalidArgs, "give exactly one of at and delay_seconds");
    int64_t due = 0;
    if (has_delay) {
      const Json& d = args["delay_seconds"];
      if (!d.is_number_integer() || d.get<int64_t>() < 1 ||
          d.get<int64_t>() > kMaxScheduleAheadUs / 1'000'000) {
        return ToolFail(errc::kInvalidArgs, "delay_seconds must be an integer from 1 to 2592000");
      }
      due = ctx.now_us + d.get<int64_t>() * 1'000'000;
    } else if (!ParseTime(at, &due)) {
      return ToolFail(errc::kInvalidArgs, "at must be an RFC 3339 time");
    }
    if (due <= ctx.now_us) return ToolFail(errc::kInvalidArgs, "at must be in the future");
    if (due - ctx.now_us > kMaxScheduleAheadUs)
      return ToolFail(errc::kInvalidArgs, "at must be within 30 days");
    // A bound on what one agent keeps pending (and on what list reads).
    ScheduleBook book;
    Json fail;
    if (!Read(ctx, &book, &fail)) return fail;
    size_t pending = 0;
    for (const ScheduleEntry* s : book.OfAgent(ctx.org_id, ctx.agent_id)) {
      pending += s->state == ScheduleEntry::State::kScheduled;
    }
    if (pending >= kMaxPendingPerAgent) {
      return ToolFail(
          errc::kScheduleLimit,
          "this agent has " + std::to_string(pending) + " pending schedules, the most it may have", true);
    }
    Json out{{"action", "create"},        {"schedule_id", ScheduleIdOf(ctx.org_id, ctx.request_id)},
             {"due_at", FormatTime(due)}, {"tool", tool},
             {"args", call_args},         {"session_id", ctx.session_id},
             {"status", "scheduled"}};
    if (!tool_action.empty()) out["tool_action"] = tool_action;
    if (!description.empty()) out["description"] = description;
    return ToolOk(out);
  }

  Json List(const Json& args, const ToolContext& ctx) const {
    if (args.contains("include_done") && !args["include_done"].is_boolean()) {
      return ToolFail(errc::kInvalidArgs, "include_done must be a boolean");
    }
    const bool all = args.value("include_done", false);
    ScheduleBook book;
    Json fail;
    if (!Read(ctx, &book, &fail)) return fail;
    Json list = Json::array();
    for (const ScheduleEntry* s : book.OfAgent(ctx.org_id, ctx.agent_id)) {
      if (all || s->state == ScheduleEntry::State::kScheduled) list.push_back(s->ToJson());
    }
    const size_t n = list.size();
    return ToolOk({{"action", "list"}, {"schedules", std::move(list)}, {"count", n}});
  }

  Json Cancel(const Json& args, const ToolContext& ctx) const {
    std::string id;
    if (!StringArg(args, "schedule_id", &id) || id.empty()) {
      return ToolFail(errc::kInvalidArgs, "schedule_id must name a schedule");
    }
    ScheduleBook book;
    Json fail;
    if (!Read(ctx, &book, &fail)) return fail;
    const ScheduleEntry* s = book.Find(id);
    // Another agent's schedule is not this one's to see: the same answer.
    if (s == nullptr || s->org_id != ctx.org_id || s->agent_id != ctx.agent_id) {
      return ToolFail(errc::kScheduleNotFound, "this agent has no schedule " + id);
    }
    if (s->state != ScheduleEntry::State::kScheduled) {
      return ToolFail(
          errc::kScheduleDone,
          id + " has already " + (s->state == ScheduleEntry::State::kFired ? "fired" : "been cancelled"));
    }
    if (s->due_us - ctx.now_us < kCancelCutoffUs) {
      return ToolFail(errc::kScheduleDone, id + " is due at " + FormatTime(s->due_us) +
                                               ": too close to cancel (a cancel must come 2 s before)");
    }
    return ToolOk({{"action", "cancel"},
                   {"schedule_id", id},
                   {"status", "cancelled"},
                   {"due_at", FormatTime(s->due_us)},
                   {"tool", s->tool}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeSchedule() { return std::make_unique<ScheduleTool>(); }

}  // namespace tollgate
