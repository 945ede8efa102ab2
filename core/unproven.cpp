#include "core/unproven.h"

#include "core/auth.h"
#include "core/messages.h"
#include "core/sha256.h"
#include "core/trace.h"

namespace tollgate {
namespace {

constexpr std::string_view kNul("\0", 1);
// Verdicts remembered per partition, for a message read again.
constexpr size_t kRecentVerdicts = 4096;

// "<incarnation>/<topic>/<partition>" and the offset of a runner source;
// false for anything else (a tick, a test's context).
bool SplitSource(const std::string& source, std::string* partition, int64_t* offset) {
  const size_t slash = source.rfind('/');
  if (slash == std::string::npos || slash + 1 >= source.size() || slash == 0) return false;
  int64_t o = 0;
  for (size_t i = slash + 1; i < source.size(); ++i) {
    const char c = source[i];
    if (c < '0' || c > '9' || o > (INT64_MAX - 9) / 10) return false;
    o = o * 10 + (c - '0');
  }
  *partition = source.substr(0, slash);
  *offset = o;
  return true;
}

}  // namespace

std::string UnprovenRequestId(const Message& in) {
  auto it = in.headers.find(kHeaderAuth);
  const std::string auth = it == in.headers.end() ? "" : it->second;
  const std::string len = std::to_string(auth.size());
  return "u-" + ToHex(Sha256({"tollgate.unproven.v1", kNul, len, ":", auth, in.value})).substr(0, 24);
}

Event UnprovenRefusalEvent(const Message& in, const std::string& source, int64_t time_us,
                           const UnprovenRefusal& why) {
  Event e;
  e.type = ev::kRequestRejected;
  e.org_id = e.agent_id = e.session_id = kUnprovenId;
  e.request_id = UnprovenRequestId(in);
  e.id = MakeRequestEventId(e.org_id, e.type, e.request_id, source);
  e.time_us = time_us;
  e.data = {{"error", {{"code", why.code}, {"message", ToValidUtf8(why.message)}}},
            {"source", source},
            {"stage", why.stage},
            {"size_bytes", in.value.size()}};
  if (why.data.is_object()) e.data.update(why.data);
  StampTraceparent(NewTraceparent(e.org_id, e.request_id), &e);
  return e;
}

StageOutput UnprovenRefusalResult(const Topics& topics, const Event& refusal, int event_index) {
  const Json request{{"request_id", refusal.request_id},
                     {"org_id", kUnprovenId},
                     {"agent_id", kUnprovenId},
                     {"session_id", kUnprovenId},
                     {"tool", ""}};
  const Json& error = refusal.data.contains("error") ? refusal.data["error"] : Json::object();
  Json result = MakeResult(
      request, "rejected", nullptr, nullptr,
      ToolResultError(error.value("code", errc::kInvalidRequest), error.value("message", ""), false));
  Message out = MessageFor(topics.results(), request, result);
  StampTraceparent(TraceparentOf(refusal), &out);
  return {std::move(out), event_index, std::move(result)};
}

StageResult RefuseUnproven(const Topics& topics, const Message& in, const StageContext& ctx,
                           const UnprovenRefusal& why) {
  StageResult r;
  r.events.push_back(UnprovenRefusalEvent(in, ctx.source, ctx.now_us, why));
  r.outputs.push_back(UnprovenRefusalResult(topics, r.events.back(), 0));
  return r;
}

void RefusalCount::Add(const std::string& source, int64_t time_us, uint64_t size, const std::string& check) {
  if (count == 0) {
    first_source = source;
    first_time_us = time_us;
  }
  ++count;
  bytes += size;
  last_source = source;
  last_time_us = time_us;
  if (!check.empty()) ++checks[check];
}

Event RefusalSummaryEvent(const RefusalCount& c, int64_t time_us) {
  Event e;
  e.type = ev::kRequestRejected;
  e.org_id = e.agent_id = e.session_id = kUnprovenId;
  e.request_id =
      "s-" + ToHex(Sha256({"tollgate.refusals.v1", kNul, c.stage, kNul, c.code, kNul, c.first_source}))
                 .substr(0, 24);
  e.id = MakeRequestEventId(e.org_id, e.type, e.request_id, c.first_source);
  e.time_us = time_us;
  Json checks = Json::object();
  for (const auto& [k, n] : c.checks) checks[ToValidUtf8(k)] = n;
  e.data = {{"error",
             {{"code", c.code},
              {"message", std::to_string(c.count) + " more refusals of unproven messages (" + c.code +
                              "), counted, not logged one by one"}}},
            {"stage", c.stage},
            {"summary",
             {{"count", c.count},
              {"bytes", c.bytes},
              {"first_source", c.first_source},
              {"last_source", c.last_source},
              {"first_time", FormatTime(c.first_time_us)},
              {"last_time", FormatTime(c.last_time_us)},
              {"checks", std::move(checks)}}}};
  StampTraceparent(NewTraceparent(e.org_id, e.request_id), &e);
  return e;
}

RefusalLimiter::Verdict RefusalLimiter::Admit(const std::string& stage, const std::string& code,
                                              const std::string& check, const std::string& source,
                                              uint64_t size, int64_t now_us) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string pkey;
  int64_t offset = -1;
  Partition* part = nullptr;
  if (SplitSource(source, &pkey, &offset)) {
    part = &partitions_[pkey];
    if (offset <= part->highest) {
      // Read again (a rewound batch): its first verdict, never a second count.
      auto it = part->recent.find(offset);
      return it != part->recent.end() && it->second ? Verdict::kLog : Verdict::kAlreadyCounted;
    }
  }
  Window& w = windows_[code];
  if (w.start_us == 0 || now_us >= w.start_us + options_.window_us || now_us < w.start_us) {
    if (w.pending.count > 0) due_.push_back(RefusalSummaryEvent(w.pending, now_us));
    w = Window{};
    w.start_us = now_us;
  }
  w.last_us = now_us;
  const bool log = w.logged < options_.individual;
  if (log) {
    ++w.logged;
  } else {
    if (w.pending.count == 0) {
      w.pending.stage = stage;
      w.pending.code = code;
    }
    w.pending.Add(source, now_us, size, check);
  }
  if (part != nullptr) {
    part->highest = offset;
    part->recent[offset] = log;
    if (part->recent.size() > kRecentVerdicts) part->recent.erase(part->recent.begin());
  }
  return log ? Verdict::kLog : Verdict::kCounted;
}

StageResult RefusalLimiter::Tick(int64_t now_us, const LogView& log) {
  std::lock_guard<std::mutex> lock(mu_);
  StageResult r;
  // Made before: dropped once the log holds them, else made again (same id).
  std::vector<Event> keep;
  for (Event& e : due_) {
    std::vector<Event> have;
    Status s = log.EventsOfRequest(e.org_id, e.request_id, &have);
    bool held = false;
    for (const Event& h : have) held = held || h.id == e.id;
    if (s.ok() && held) continue;
    r.events.push_back(e);
    keep.push_back(std::move(e));
  }
  due_ = std::move(keep);
  for (auto& [code, w] : windows_) {
    if (w.pending.count == 0) continue;
    if (now_us < w.start_us + options_.window_us && now_us < w.last_us + options_.quiet_us) continue;
    due_.push_back(RefusalSummaryEvent(w.pending, now_us));
    r.events.push_back(due_.back());
    w.pending = RefusalCount{};  // the window's quota stays spent until it ends
  }
  return r;
}

std::string RequestIdOfSource(const std::string& source) { return "k-" + Sha256Hex(source).substr(0, 24); }

}  // namespace tollgate
