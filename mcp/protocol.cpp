#include "mcp/protocol.h"

#include <algorithm>
#include <random>

#include "core/event.h"
#include "core/sha256.h"

namespace tollgate::mcp {

const std::vector<std::string>& SupportedVersions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
  return kVersions;
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

std::string DescribeProgress(const Json& events) {
  if (!events.is_array() || events.empty()) return "";
  std::string where = "received", deadline;
  int grants = 0;
  int64_t quorum = 1;
  for (const Json& e : events) {
    const std::string type = e.value("type", "");
    const Json data = e.value("data", Json::object());
    if (type == ev::kDecisionMade) where = "decided";
    if (type == ev::kApprovalRequested) {
      where = "awaiting approval";
      deadline = data.value("deadline", "");
      if (data.contains("quorum") && data["quorum"].is_number_integer()) quorum = data["quorum"];
    }
    if (type == ev::kApprovalGranted) ++grants;
    if (type == ev::kExecutionStarted) where = "executing";
  }
  if (where != "awaiting approval") return where;
  return where + ": " + std::to_string(grants) + " of " + std::to_string(quorum) + " approvals, expires at " +
         deadline;
}

}  // namespace tollgate::mcp
