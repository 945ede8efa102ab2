#include "core/messages.h"

#include "core/sha256.h"

namespace tollgate {

Json ToolResultOk(Json data, double duration_ms) {
  return Json{{"success", true}, {"data", std::move(data)}, {"error", nullptr}, {"meta", {{"duration_ms", duration_ms}}}};
}

Json ToolResultError(const std::string& code, const std::string& message, bool recoverable, double duration_ms) {
  return Json{{"success", false},
              {"data", nullptr},
              {"error", {{"code", code}, {"message", message}, {"recoverable", recoverable}}},
              {"meta", {{"duration_ms", duration_ms}}}};
}

Json Flow::ToJson() const {
  Json j{{"request", request}, {"received_at", received_at}, {"args_hash", args_hash}};
  if (!decision.is_null()) j["decision"] = decision;
  return j;
}

bool Flow::FromJson(const Json& j, Flow* out) {
  if (!j.is_object() || !j.contains("request") || !j["request"].is_object() ||
      !j.contains("received_at") || !j["received_at"].is_string() || !j.contains("args_hash") ||
      !j["args_hash"].is_string()) {
    return false;
  }
  const Json& r = j["request"];
  for (const char* k : {"request_id", "org_id", "agent_id", "session_id", "tool"}) {
    if (!r.contains(k) || !r[k].is_string()) return false;
  }
  out->request = r;
  out->received_at = j["received_at"];
  out->args_hash = j["args_hash"];
  out->decision = j.value("decision", Json());
  return true;
}

Json MakeResult(const Json& request, const std::string& status, const Json& decision, const Json& approval,
                const Json& tool_result) {
  Json r{{"request_id", request.value("request_id", "")},
         {"org_id", request.value("org_id", "")},
         {"agent_id", request.value("agent_id", "")},
         {"session_id", request.value("session_id", "")},
         {"tool", request.value("tool", "")},
         {"status", status},
         {"decision", decision},
         {"result", tool_result},
         {"log_seq", 0}};
  if (!approval.is_null()) r["approval"] = approval;
  return r;
}

Message MessageFor(const std::string& topic, const Json& request, const Json& value) {
  Message m;
  m.topic = topic;
  m.key = request.value("agent_id", "");
  m.value = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  const std::string rid = request.value("request_id", "");
  m.headers[kHeaderRequestId] = rid;
  m.headers[kHeaderSessionId] = request.value("session_id", "");
  std::string trace = rid;
  if (auto md = request.find("metadata"); md != request.end() && md->is_object()) {
    if (auto t = md->find("trace_id"); t != md->end() && t->is_string()) trace = t->get<std::string>();
  }
  m.headers[kHeaderTraceId] = trace;
  return m;
}

std::string ArgsHash(const Json& args) {
  std::string bytes;
  if (!CanonicalBytes(args, &bytes).ok()) bytes = args.dump(-1, ' ', false, Json::error_handler_t::replace);
  return Sha256Hex(bytes);
}

void SetLogSeq(Message* m, uint64_t seq) {
  Json v = Json::parse(m->value, nullptr, false);
  if (!v.is_object()) return;
  v["log_seq"] = seq;
  m->value = v.dump();
}

}  // namespace tollgate
