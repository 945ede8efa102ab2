#include "mcp/protocol.h"

#include <algorithm>
#include <random>

#include "core/event.h"
#include "core/jwt.h"
#include "core/sha256.h"

namespace tollgate::mcp {

const std::vector<std::string>& SupportedVersions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
  return kVersions;
}

const std::vector<std::string>& ModernVersions() {
  static const std::vector<std::string> kVersions = {kModernVersion};
  return kVersions;
}

bool IsModernVersion(const std::string& v) {
  const auto& m = ModernVersions();
  return std::find(m.begin(), m.end(), v) != m.end();
}

namespace {

const Json& ServerInfo() {
  static const Json kInfo{{"name", "tollgate"}, {"title", "tollgate gateway"}, {"version", "0.3"}};
  return kInfo;
}

void RefuseEnvelope(Envelope* e, const std::string& key, const std::string& problem) {
  e->error_code = kInvalidParams;
  e->error_message =
      "invalid _meta envelope for protocol revision " + e->version + ": " + key + ": " + problem;
  e->error_data = {{"envelope", {{"key", key}, {"problem", problem}}}};
}

}  // namespace

Envelope ReadEnvelope(const Json& params) {
  Envelope e;
  if (!params.is_object()) return e;
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return e;
  auto v = meta->find(kMetaVersion);
  if (v == meta->end()) return e;
  e.modern = true;
  if (!v->is_string() || !IsModernVersion(v->get<std::string>())) {
    e.version = v->is_string() ? v->get<std::string>() : v->dump();
    e.error_code = kUnsupportedVersion;
    e.error_message = "unsupported protocol version: " + e.version;
    e.error_data = {{"supported", ModernVersions()}, {"requested", e.version}};
    return e;
  }
  e.version = v->get<std::string>();
  auto caps = meta->find(kMetaCapabilities);
  if (caps == meta->end()) {
    RefuseEnvelope(&e, kMetaCapabilities, "missing");
    return e;
  }
  if (!caps->is_object()) {
    RefuseEnvelope(&e, kMetaCapabilities, "not an object");
    return e;
  }
  if (auto ext = caps->find("extensions"); ext != caps->end() && ext->is_object()) {
    e.tasks = ext->contains(kTasksExtension);
  }
  if (auto info = meta->find(kMetaClientInfo); info != meta->end() && info->is_object()) {
    if (auto n = info->find("name"); n != info->end() && n->is_string()) e.client_name = *n;
  }
  return e;
}

Json MissingTasksError(const Json& id) {
  return Error(id, kMissingCapability, "missing required client capability",
               {{"requiredCapabilities", {{"extensions", {{kTasksExtension, Json::object()}}}}}});
}

Json Complete(Json result) {
  result["resultType"] = "complete";
  Json& meta = result["_meta"];
  if (!meta.is_object()) meta = Json::object();
  meta[kMetaServerInfo] = ServerInfo();
  return result;
}

Json DiscoverResult(const std::string& instructions) {
  return Complete(
      {{"supportedVersions", ModernVersions()},
       {"capabilities",
        {{"tools", {{"listChanged", true}}}, {"extensions", {{kTasksExtension, Json::object()}}}}},
       {"instructions", instructions},
       {"ttlMs", 0},
       {"cacheScope", "private"}});
}

std::string DecodeHeaderValue(const std::string& v) {
  static const std::string kOpen = "=?base64?", kClose = "?=";
  if (v.size() < kOpen.size() + kClose.size() || v.compare(0, kOpen.size(), kOpen) != 0 ||
      v.compare(v.size() - kClose.size(), kClose.size(), kClose) != 0) {
    return v;
  }
  // Standard base64 (padded) as base64url without padding, for the strict
  // decoder we have.
  std::string b = v.substr(kOpen.size(), v.size() - kOpen.size() - kClose.size());
  while (!b.empty() && b.back() == '=') b.pop_back();
  for (char& c : b) {
    if (c == '+')
      c = '-';
    else if (c == '/')
      c = '_';
    else if (c == '-' || c == '_')
      return "";
  }
  std::string out;
  return Base64UrlDecode(b, &out) ? out : "";
}

std::string NegotiateVersion(const std::string& requested) {
  const auto& v = SupportedVersions();
  return std::find(v.begin(), v.end(), requested) != v.end() ? requested : v.front();
}

Json Result(const Json& id, Json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json Error(const Json& id, int code, const std::string& message, Json data) {
  Json err{{"code", code}, {"message", message}};
  if (!data.is_null()) err["data"] = std::move(data);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}};
}

Json Notification(const std::string& method, Json params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

namespace {

bool ValidId(const Json& id) { return id.is_string() || id.is_number_integer() || id.is_number_unsigned(); }

Incoming Invalid(Json id, int code, std::string message) {
  Incoming in;
  in.id = std::move(id);
  in.error_code = code;
  in.error_message = std::move(message);
  return in;
}

}  // namespace

Incoming Parse(const std::string& text) {
  Json doc;
  Status s = ParseInputJson(text, &doc);
  if (!s.ok()) return Invalid(nullptr, kParseError, "parse error: " + s.message());
  if (doc.is_array()) return Invalid(nullptr, kInvalidRequest, "batches are not supported");
  if (!doc.is_object()) return Invalid(nullptr, kInvalidRequest, "a message must be a JSON object");
  Json id = nullptr;
  const bool has_id = doc.contains("id");
  if (has_id) {
    if (!ValidId(doc["id"])) return Invalid(nullptr, kInvalidRequest, "id must be a string or an integer");
    id = doc["id"];
  }
  if (doc.value("jsonrpc", Json()) != "2.0") return Invalid(id, kInvalidRequest, "jsonrpc must be \"2.0\"");
  Incoming in;
  in.id = id;
  if (!doc.contains("method")) {
    if (!has_id || (doc.contains("result") == doc.contains("error"))) {
      return Invalid(id, kInvalidRequest, "neither a request, a notification nor a response");
    }
    in.kind = Incoming::Kind::kResponse;
    return in;
  }
  if (!doc["method"].is_string()) return Invalid(id, kInvalidRequest, "method must be a string");
  in.method = doc["method"];
  if (doc.contains("params")) {
    if (!doc["params"].is_object()) return Invalid(id, kInvalidParams, "params must be an object");
    in.params = doc["params"];
  }
  in.kind = has_id ? Incoming::Kind::kRequest : Incoming::Kind::kNotification;
  return in;
}

std::string RequestIdFor(const std::string& mcp_session, const Json& jsonrpc_id) {
  // Keyed with a secret of this process: whoever sees a session id (results
  // carry it) cannot compute the request ids of its calls.
  static const std::string key = [] {
    std::random_device rd;
    std::string k;
    for (int i = 0; i < 32; ++i) k += static_cast<char>(rd() & 0xff);
    return k;
  }();
  return "mcp-" + Sha256Hex(key + "\n" + mcp_session + "\n" + jsonrpc_id.dump()).substr(0, 32);
}

namespace {

Json Text(const std::string& s) { return Json{{"type", "text"}, {"text", s}}; }

}  // namespace

Json CallToolResultOf(const Json& r) {
  const std::string status = r.value("status", "");
  const Json& tool_result = r.contains("result") && r["result"].is_object() ? r["result"] : Json::object();
  Json meta{{"io.tollgate/request_id", r.value("request_id", "")}, {"io.tollgate/status", status}};
  if (r.contains("log_seq")) meta["io.tollgate/log_seq"] = r["log_seq"];
  // The trace the call ran in (the agent's, or the one ingest started), so
  // the agent can join its own spans to ours.
  if (r.contains("traceparent") && r["traceparent"].is_string()) meta["traceparent"] = r["traceparent"];
  // The ToolResult's meta (duration, and a command's line and sandbox).
  if (tool_result.contains("meta") && tool_result["meta"].is_object())
    meta["io.tollgate/tool_meta"] = tool_result["meta"];
  Json out;
  if (status == "completed" && tool_result.value("success", false)) {
    const Json data = tool_result.contains("data") ? tool_result["data"] : Json(nullptr);
    // An upstream MCP tool's result keeps its own content blocks.
    if (data.is_object() && data.contains("content") && data["content"].is_array()) {
      out["content"] = data["content"];
      if (data.contains("structuredContent") && data["structuredContent"].is_object()) {
        out["structuredContent"] = data["structuredContent"];
      }
    } else {
      out["content"] = Json::array({Text(data.is_string() ? data.get<std::string>() : data.dump())});
      out["structuredContent"] = data.is_object() ? data : Json{{"result", data}};
    }
    out["isError"] = false;
  } else {
    Json error = tool_result.contains("error") && tool_result["error"].is_object() ? tool_result["error"]
                                                                                   : Json::object();
    const Json& decision = r.contains("decision") ? r["decision"] : Json(nullptr);
    std::string code = error.value("code", "");
    std::string message = error.value("message", "");
    if (code.empty() && decision.is_object()) code = decision.value("error_code", "");
    if (message.empty() && decision.is_object()) message = decision.value("reason", "");
    if (code.empty()) code = "E_" + (status.empty() ? std::string("UNKNOWN") : status);
    out["content"] = Json::array({Text(code + ": " + message)});
    // The whole ToolResult error (recoverable, alias, suggestions: the
    // seeds' fields) and any data a failed tool still returned (a command's
    // output), beside what decided it.
    error["code"] = code;
    error["message"] = message;
    out["structuredContent"] = {{"status", status}, {"error", std::move(error)}, {"decision", decision}};
    if (tool_result.contains("data") && !tool_result["data"].is_null()) {
      out["structuredContent"]["data"] = tool_result["data"];
    }
    out["isError"] = true;
  }
  out["_meta"] = std::move(meta);
  return out;
}

Json GatewayErrorResult(const std::string& request_id, const std::string& code, const std::string& message) {
  return {{"content", Json::array({Text(code + ": " + message)})},
          {"structuredContent", {{"status", "unknown"}, {"error", {{"code", code}, {"message", message}}}}},
          {"isError", true},
          {"_meta", {{"io.tollgate/request_id", request_id}, {"io.tollgate/status", "unknown"}}}};
}

std::string DescribeProgress(const RequestState& state) {
  if (state.received == nullptr) return "";
  if (state.started != nullptr) return "executing";
  if (state.approval_requested == nullptr) return state.decision != nullptr ? "decided" : "received";
  return "awaiting approval: " + std::to_string(state.grants.size()) + " of " +
         std::to_string(state.approvers_needed) + " approvals, expires at " +
         state.approval_requested->data.value("deadline", "");
}

Json PendingApprovalResult(const std::string& request_id, const std::string& where, int retry_after_s) {
  const std::string text =
      "E_PENDING_APPROVAL: request " + request_id + " is " + where +
      ". Nothing has run yet. Call the same tool with the same arguments again in about " +
      std::to_string(retry_after_s) +
      " s: that call waits for this request's outcome (no second approval is asked).";
  return {{"content", Json::array({Text(text)})},
          {"structuredContent",
           {{"status", "pending_approval"},
            {"request_id", request_id},
            {"where", where},
            {"retry_after_s", retry_after_s},
            {"error",
             {{"code", "E_PENDING_APPROVAL"},
              {"message", "awaiting approval; call again with the same arguments for the outcome"},
              {"recoverable", true}}}}},
          {"isError", true},
          {"_meta", {{"io.tollgate/request_id", request_id}, {"io.tollgate/status", "pending"}}}};
}

}  // namespace tollgate::mcp
