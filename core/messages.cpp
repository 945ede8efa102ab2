#include "core/messages.h"

#include "core/sha256.h"

namespace tollgate {

std::string TopicSafeName(const std::string& name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '.';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (out.empty() || out.size() > 180) return ".h" + Sha256Hex(name).substr(0, 40);
  return out;
}

std::string Topics::results_for(const std::string& org) const {
  return shared_results ? results() : results() + "." + TopicSafeName(org);
}

Json ToolResultOk(Json data, double duration_ms) {
  return Json{{"success", true},
              {"data", std::move(data)},
              {"error", nullptr},
              {"meta", {{"duration_ms", duration_ms}}}};
}

const char* ErrorAlias(std::string_view code) {
  // seed name -> tollgate's earlier name for the same condition.
  static constexpr std::pair<std::string_view, const char*> kAliases[] = {
      {"E_WRITE_DISABLED", "E_WRITES_DISABLED"}, {"E_HTTP_ERROR", "E_HTTP"},
      {"E_HTTP_METHOD", "E_METHOD_NOT_ALLOWED"}, {"E_CALC_ERROR", "E_INVALID_ARGS"},
      {"E_DIR_NOT_FOUND", "E_FILE_NOT_FOUND"},   {"E_PATH_NOT_FOUND", "E_FILE_NOT_FOUND"},
      {"E_PERMISSION", "E_PATH_FORBIDDEN"},      {"E_INVALID_PATH", "E_INVALID_ARGS"},
      {"E_READ_ERROR", "E_TOOL_EXEC"},           {"E_WRITE_ERROR", "E_TOOL_EXEC"},
      {"E_LIST_ERROR", "E_TOOL_EXEC"},           {"E_SEARCH_ERROR", "E_TOOL_EXEC"},
      {"E_AUDIT_ERROR", "E_TOOL_EXEC"},
  };
  for (const auto& [seed, old] : kAliases) {
    if (seed == code) return old;
  }
  return nullptr;
}

bool SeedRecoverable(std::string_view code) {
  return code == "E_FILE_NOT_FOUND" || code == "E_DIR_NOT_FOUND" || code == "E_PATH_NOT_FOUND";
}

Json ToolResultErrorAs(const std::string& code, const std::string& alias, const std::string& message,
                       bool recoverable) {
  Json r = ToolResultError(code, message, recoverable);
  if (alias.empty() || alias == code) {
    r["error"].erase("alias");
  } else {
    r["error"]["alias"] = alias;
  }
  return r;
}

Json ToolResultError(const std::string& code, const std::string& message, bool recoverable,
                     double duration_ms) {
  Json error{{"code", code}, {"message", message}, {"recoverable", recoverable || SeedRecoverable(code)}};
  if (const char* alias = ErrorAlias(code)) error["alias"] = alias;
  return Json{{"success", false},
              {"data", nullptr},
              {"error", std::move(error)},
              {"meta", {{"duration_ms", duration_ms}}}};
}

Json Flow::ToJson() const {
  Json j{{"request", request}, {"received_at", received_at}, {"args_hash", args_hash}};
  if (!decision.is_null()) j["decision"] = decision;
  return j;
}

bool Flow::FromJson(const Json& j, Flow* out) {
  if (!j.is_object() || !j.contains("request") || !j["request"].is_object() || !j.contains("received_at") ||
      !j["received_at"].is_string() || !j.contains("args_hash") || !j["args_hash"].is_string()) {
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

Event RequestRejectedEvent(const Json& request, const std::string& code, const std::string& message,
                           const std::string& discriminator, const std::string& source, int64_t now_us) {
  auto str = [&request](const char* k) {
    auto it = request.find(k);
    return it != request.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Event e;
  e.type = ev::kRequestRejected;
  e.org_id = str("org_id");
  e.agent_id = str("agent_id");
  e.session_id = str("session_id");
  e.request_id = str("request_id");
  e.tool = str("tool");
  e.id = MakeRequestEventId(e.org_id, e.type, e.request_id, discriminator);
  e.time_us = now_us;
  e.data = {{"error", {{"code", code}, {"message", message}}}, {"source", source}};
  return e;
}

bool EndRequestForOversizeOutput(const Message& output, const Topics& topics, const std::string& stage,
                                 const std::string& source, int64_t now_us, Event* event, Message* result,
                                 size_t limit) {
  Json v;
  if (!ParseJson(output.value, &v).ok() || !v.is_object()) return false;
  // A flow carries its request; a result names it at the top level.
  const Json& named = v.contains("request") && v["request"].is_object() ? v["request"] : v;
  Json request = Json::object();
  for (const char* k : {"request_id", "org_id", "agent_id", "session_id", "tool"}) {
    auto it = named.find(k);
    if (it == named.end() || !it->is_string()) return false;
    request[k] = *it;
  }
  if (request["request_id"] == "" || request["org_id"] == "") return false;
  const std::string msg = stage + " could not send this request's output to " + output.topic + ": it is " +
                          std::to_string(output.bytes()) + " bytes and the limit is " + std::to_string(limit);
  Event e =
      RequestRejectedEvent(request, errc::kOutputTooLarge, msg, "output-too-large/" + source, source, now_us);
  e.data["stage"] = stage;
  e.data["size_bytes"] = output.bytes();
  *event = std::move(e);
  *result = MessageFor(
      topics.results(), request,
      MakeResult(request, "failed", nullptr, nullptr, ToolResultError(errc::kOutputTooLarge, msg, false)));
  return true;
}

std::string TruncateUtf8(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  const std::string mark = "…[" + std::to_string(text.size()) + " bytes, cut]";
  size_t keep = max > mark.size() ? max - mark.size() : 0;
  // Back off to the start of a character (never split a sequence).
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return ToValidUtf8(text.substr(0, keep)) + mark;
}

bool BoundDecision(Json* d) {
  if (!d->is_object()) return false;
  bool changed = false;
  auto text = [&](Json& field, size_t max) {
    if (field.is_string() && field.get_ref<const std::string&>().size() > max) {
      field = TruncateUtf8(field.get_ref<const std::string&>(), max);
      changed = true;
    }
  };
  size_t over = 0;
  const char* what = "";
  for (const char* k : {"invocation", "subject"}) {
    auto it = d->find(k);
    if (it != d->end() && it->is_string() && it->get_ref<const std::string&>().size() > kMaxInvocationBytes) {
      over = it->get_ref<const std::string&>().size();
      what = k;
      break;
    }
  }
  if (over > 0) {
    (*d)["verdict"] = "deny";
    (*d)["error_code"] = errc::kInvocationTooLarge;
    (*d)["reason"] = std::string("the request's ") + what + " is " + std::to_string(over) +
                     " bytes; the limit is " + std::to_string(kMaxInvocationBytes);
    (*d)["rule"] = "limits." + std::string(what);
    d->erase("reservation");
    d->erase("approval");
    d->erase("notify");
    for (const char* k : {"invocation", "subject"}) {
      if (d->contains(k)) text((*d)[k], 1024);
    }
    changed = true;
  }
  if (d->contains("reason")) text((*d)["reason"], kMaxReasonBytes);
  if (auto c = d->find("checks"); c != d->end() && c->is_array()) {
    if (c->size() > kMaxDecisionChecks) {
      c->erase(c->begin() + kMaxDecisionChecks, c->end());
      changed = true;
    }
    for (auto& check : *c) {
      if (check.is_object() && check.contains("detail")) text(check["detail"], kMaxCheckDetailBytes);
    }
  }
  if (over > 0) {
    if (!d->contains("checks") || !(*d)["checks"].is_array()) (*d)["checks"] = Json::array();
    (*d)["checks"].push_back({{"check", "limits"}, {"result", "deny"}, {"detail", (*d)["reason"]}});
  }
  return changed;
}

void SetLogSeq(Message* m, uint64_t seq) {
  Json v;
  if (!ParseJson(m->value, &v).ok() || !v.is_object()) return;
  v["log_seq"] = seq;
  m->value = v.dump();
}

}  // namespace tollgate
