#include "ingest/ingest_stage.h"

#include "core/messages.h"
#include "core/redact.h"
#include "core/request_state.h"
#include "core/schema.h"
#include "core/sha256.h"

namespace tollgate {
namespace {

constexpr const char* kUnknown = "unknown";

// `v` if it can stand in an event envelope, else "unknown": rejected input
// still needs an org, agent and session to be filed under.
std::string SafeId(const Json* v) {
  if (v == nullptr || !v->is_string()) return kUnknown;
  const std::string& s = v->get_ref<const std::string&>();
  if (s.empty() || s.size() > kMaxIdBytes) return kUnknown;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return kUnknown;
  }
  std::string canon;
  if (!CanonicalBytes(Json(s), &canon).ok()) return kUnknown;  // invalid UTF-8
  return s;
}

const Json* Field(const Json& j, const char* name) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

std::string DerivedRequestId(const std::string& source) { return "k-" + Sha256Hex(source).substr(0, 24); }

}  // namespace

StageResult IngestStage::Reject(const Message& in, const StageContext& ctx, const Json& partial,
                                const std::string& request_id, const std::string& code,
                                const std::string& message, const std::string& discriminator) {
  const Json key(in.key);
  const Json* agent = Field(partial, "agent_id");
  Json request{{"request_id", request_id},
               {"org_id", SafeId(Field(partial, "org_id"))},
               {"agent_id", SafeId(agent ? agent : &key)},
               {"session_id", SafeId(Field(partial, "session_id"))},
               {"tool", SafeId(Field(partial, "tool"))}};
  if (request["tool"] == kUnknown) request["tool"] = "";
  Event e;
  e.type = "request.rejected";
  e.request_id = request_id;
  e.id = MakeEventId(e.type, request_id, discriminator);
  e.time_us = ctx.now_us;
  e.org_id = request["org_id"];
  e.agent_id = request["agent_id"];
  e.session_id = request["session_id"];
  e.tool = request["tool"];
  e.data = {{"error", {{"code", code}, {"message", message}}},
            {"source", ctx.source},
            {"size_bytes", in.value.size()}};
  StageResult r;
  r.events.push_back(std::move(e));
  Json result = MakeResult(request, "rejected", nullptr, nullptr, ToolResultError(code, message, false));
  Message out = MessageFor(config_.topics.results(), request, result);
  if (request["agent_id"] == kUnknown && !in.key.empty()) out.key = in.key;  // back to the sender's partition
  r.outputs.push_back({std::move(out), 0});
  return r;
}

StageResult IngestStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  const std::string derived_id = DerivedRequestId(ctx.source);
  if (in.value.size() > config_.max_request_bytes) {
    return Reject(in, ctx, Json(), derived_id, errc::kRequestTooLarge,
                  "request is " + std::to_string(in.value.size()) + " bytes; the limit is " +
                      std::to_string(config_.max_request_bytes));
  }
  Json doc;
  Status s = ParseJson(in.value, &doc);
  if (!s.ok()) return Reject(in, ctx, Json(), derived_id, errc::kInvalidRequest, "request is not JSON: " + s.message());
  if (!doc.is_object()) {
    return Reject(in, ctx, Json(), derived_id, errc::kInvalidRequest, "request must be a JSON object");
  }
  std::string request_id = derived_id;
  if (const Json* rid = Field(doc, "request_id"); rid && SafeId(rid) != kUnknown) request_id = rid->get<std::string>();
  s = SchemaRegistry::Builtin().Validate("tool_request", doc);
  if (!s.ok()) return Reject(in, ctx, doc, request_id, errc::kInvalidRequest, s.message(), ctx.source);

  // The normalised request: the contract's fields, request_id filled in.
  Json request{{"request_id", request_id}, {"org_id", doc["org_id"]}, {"agent_id", doc["agent_id"]},
               {"session_id", doc["session_id"]}, {"tool", doc["tool"]}, {"args", doc["args"]}};
  for (const char* opt : {"action", "estimated_cost_usd", "metadata"}) {
    if (doc.contains(opt)) request[opt] = doc[opt];
  }
  const std::string args_hash = ArgsHash(request["args"]);
  std::string canon;
  s = CanonicalBytes(request, &canon);
  if (!s.ok()) return Reject(in, ctx, doc, request_id, errc::kInvalidRequest, s.message(), ctx.source);
  const std::string content_hash = Sha256Hex(canon);

  std::vector<Event> history;
  s = log.EventsOfRequest(request_id, &history);
  if (!s.ok()) {
    // The log cannot be read: fail closed (the runner retries) rather than
    // risk a second execution.
    StageResult r;
    r.error = s;
    return r;
  }
  RequestState state = Summarize(history);
  if (state.received != nullptr) {
    if (state.received->data.value("content_hash", "") != content_hash) {
      return Reject(in, ctx, doc, request_id, errc::kDuplicateRequest,
                    "request_id '" + request_id + "' was already used for a different request", ctx.source);
    }
    StageResult r;
    if (SourceOf(state.received) == ctx.source) {
      // Read again after a crash: forward exactly what was forwarded before.
      Flow flow{request, state.received->data.value("received_at", ""), args_hash, nullptr};
      r.outputs.push_back({MessageFor(config_.topics.decide(), request, flow.ToJson()), -1});
    }
    // An agent's retry: no second execution. A finished request gets its
    // recorded outcome again; one in flight gets nothing new (its result is
    // on its way).
    Json original = ResultFromLog(state);
    if (!original.is_null()) r.outputs.push_back({MessageFor(config_.topics.results(), request, original), -1});
    return r;
  }
  // A request rejected before under this id (say, invalid then fixed) was
  // never received, so the id is still free.

  Json logged = request;
  std::vector<std::string> redacted;
  for (const char* part : {"args", "metadata"}) {
    if (logged.contains(part)) {
      auto more = RedactSecrets(logged[part], config_.redact_key_patterns, std::string("/") + part);
      redacted.insert(redacted.end(), more.begin(), more.end());
    }
  }
  const std::string received_at = FormatTime(ctx.now_us);
  Event e;
  e.type = "request.received";
  e.request_id = request_id;
  e.id = MakeEventId(e.type, request_id);
  e.time_us = ctx.now_us;
  e.org_id = request["org_id"];
  e.agent_id = request["agent_id"];
  e.session_id = request["session_id"];
  e.tool = request["tool"];
  e.data = {{"request", logged},           {"args_hash", args_hash}, {"content_hash", content_hash},
            {"received_at", received_at}, {"source", ctx.source},   {"redacted", redacted}};
  StageResult r;
  r.events.push_back(std::move(e));
  Flow flow{request, received_at, args_hash, nullptr};
  r.outputs.push_back({MessageFor(config_.topics.decide(), request, flow.ToJson()), -1});
  return r;
}

}  // namespace tollgate
