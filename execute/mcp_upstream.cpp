#include "execute/mcp_upstream.h"

#include "core/log.h"
#include "core/signed_note.h"
#include "execute/mcp_upstream_internal.h"
#include "execute/tool.h"

namespace tollgate {
namespace {

Json ClientInfo() { return {{"name", "tollgate"}, {"version", "1"}}; }

bool ListsModern(const Json& versions) {
  if (!versions.is_array()) return false;
  for (const Json& v : versions) {
    if (v.is_string() && v.get<std::string>() == kMcpModernVersion) return true;
  }
  return false;
}

// A field value a header carries as it is (RFC 9110 5.5, as the SDK reads
// it): leading or trailing whitespace would be stripped by the receiver,
// and a value of the encoded form would be decoded.
bool PlainFieldValue(std::string_view v) {
  if (v.empty() || v.front() == ' ' || v.front() == '\t' || v.back() == ' ' || v.back() == '\t') return false;
  if (v.starts_with("=?base64?") && v.ends_with("?=")) return false;
  for (const unsigned char c : v) {
    if (c != '\t' && (c < 0x20 || c > 0x7e)) return false;
  }
  return true;
}

}  // namespace

Json McpInitializeParams() {
  return {
      {"protocolVersion", kMcpClientVersion}, {"capabilities", Json::object()}, {"clientInfo", ClientInfo()}};
}

std::string McpLegacyVersion(const Json& result) {
  if (!result.is_object() || !result.contains("protocolVersion") || !result["protocolVersion"].is_string()) {
    return kMcpClientVersion;
  }
  const std::string v = result["protocolVersion"].get<std::string>();
  static constexpr const char* kPlain = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-";
  const bool plain = !v.empty() && v.size() <= 32 && v.find_first_not_of(kPlain) == std::string::npos;
  return plain ? v : kMcpClientVersion;
}

Json McpWithEnvelope(const Json& params) {
  Json out = params.is_object() ? params : Json::object();
  Json& meta = out["_meta"];
  if (!meta.is_object()) meta = Json::object();
  meta["io.modelcontextprotocol/protocolVersion"] = kMcpModernVersion;
  meta["io.modelcontextprotocol/clientCapabilities"] = Json::object();
  meta["io.modelcontextprotocol/clientInfo"] = ClientInfo();
  return out;
}

Json McpDiscoverParams() { return McpWithEnvelope(Json::object()); }

McpEra McpProbeEra(const Json& msg) {
  if (!msg.is_object()) return McpEra::kLegacy;
  if (msg.contains("result")) {
    const Json& r = msg["result"];
    return r.is_object() && r.contains("supportedVersions") && ListsModern(r["supportedVersions"])
               ? McpEra::kModern
               : McpEra::kLegacy;
  }
  if (msg.contains("error") && msg["error"].is_object()) {
    const Json& e = msg["error"];
    const bool unsupported = e.contains("code") && e["code"].is_number_integer() && e["code"] == -32022;
    const bool names_modern = e.contains("data") && e["data"].is_object() &&
                              e["data"].contains("supported") && ListsModern(e["data"]["supported"]);
    if (unsupported && names_modern) return McpEra::kModern;
  }
  return McpEra::kLegacy;
}

Status McpModernResult(const std::string& server, const std::string& method, const Json& result) {
  const bool has = result.is_object() && result.contains("resultType");
  if (has && result["resultType"] == "complete") return Status::Ok();
  std::string what = "no resultType", why;
  if (has && result["resultType"].is_string()) {
    const std::string t = result["resultType"].get<std::string>();
    what = "resultType \"" + TruncateUtf8(t, 64) + "\"";
    if (t == "input_required") why = ": it asks the client for input, and tollgate serves no input requests";
    if (t == "task") why = ": it hands back a task, and tollgate holds no upstream tasks";
  } else if (has) {
    what = "a resultType that is not a string";
  }
  return Status::Error(errc::kUpstreamProtocol,
                       "upstream MCP server '" + server + "' answered " + method + " with " + what + why +
                           " (tollgate takes only \"complete\" " + kMcpModernVersion + " results)");
}

std::string McpHeaderValue(std::string_view value) {
  if (PlainFieldValue(value)) return std::string(value);
  return "=?base64?" + Base64StdEncode(value) + "?=";
}

std::vector<std::string> McpModernHeaders(const std::string& method, const Json& params) {
  std::vector<std::string> h{std::string("MCP-Protocol-Version: ") + kMcpModernVersion,
                             "Mcp-Method: " + McpHeaderValue(method)};
  const char* field = method == "tools/call" || method == "prompts/get" ? "name"
                      : method == "resources/read"                      ? "uri"
                                                                        : nullptr;
  if (field != nullptr && params.is_object() && params.contains(field) && params[field].is_string()) {
    h.push_back("Mcp-Name: " + McpHeaderValue(params[field].get<std::string>()));
  }
  return h;
}

Status ParseUpstreamMessage(std::string_view bytes, Json* out) {
  JsonLimits limits;
  limits.max_depth = kMaxUpstreamDepth;
  limits.max_bytes = kMaxUpstreamMessage;
  return ParseJson(bytes, out, limits);
}

std::string McpRefusal(const std::string& server, const std::string& what, const Status& why) {
  return "upstream MCP server '" + server + "' sent " + what + " tollgate refuses (" + why.code() + ": " +
         TruncateUtf8(why.message(), 500) + ")";
}

Status McpAnswer(const std::string& server, const std::string& method, const Json& msg, Json* result) {
  if (msg.contains("x-unavailable"))
    return Status::Error(errc::kUpstreamUnavailable, msg["x-unavailable"].get<std::string>());
  if (msg.contains("x-protocol")) {
    return Status::Error(errc::kUpstreamProtocol, msg["x-protocol"].get<std::string>());
  }
  if (msg.contains("error")) {
    const Json& e = msg["error"];
    const bool has_text = e.is_object() && e.contains("message") && e["message"].is_string();
    // Cut at a character boundary: the text goes into events, whose bytes
    // must stay valid UTF-8.
    const std::string text = TruncateUtf8(has_text ? e["message"].get<std::string>() : e.dump(), 2000);
    const int64_t code =
        e.is_object() && e.contains("code") && e["code"].is_number_integer() ? e["code"].get<int64_t>() : 0;
    return Status::Error(errc::kUpstreamToolError, "upstream MCP server '" + server + "' refused " + method +
                                                       " (" + std::to_string(code) + "): " + text);
  }
  *result = msg.contains("result") ? msg["result"] : Json::object();
  return Status::Ok();
}

void McpUpstream::SetState(State s, const std::string& error) {
  std::string became_ready;  // what the log says of a connection now serving
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s == State::kReady && state_ != State::kReady) {
      became_ready = "upstream MCP server '" + spec_.name + "' is ready: era " +
                     (era_.empty() ? std::string("unknown") : era_) + ", " + std::to_string(tools_.size()) +
                     " tools";
    }
    state_ = s;
    if (s == State::kReady) {
      error_.clear();
    } else if (!error.empty()) {
      error_ = error;
    }
  }
  cv_.notify_all();
  // Which era a server speaks is an operator's first question when it
  // misbehaves: said once per connection.
  if (!became_ready.empty()) log::Info({"execute"}) << became_ready;
}

void McpUpstream::SetEra(std::string era) {
  std::lock_guard<std::mutex> lock(mu_);
  era_ = std::move(era);
}

bool McpUpstream::Modern() const {
  std::lock_guard<std::mutex> lock(mu_);
  return era_ == kMcpModernVersion;
}

void McpUpstream::SetTools(Json tools) {
  std::lock_guard<std::mutex> lock(mu_);
  tools_ = tools.is_array() ? std::move(tools) : Json::array();
}

Json McpUpstream::StatusJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json j{{"transport", spec_.url.empty() ? "stdio" : "http"},
         {"state", state_ == State::kReady  ? "ready"
                   : state_ == State::kDown ? "down"
                                            : "starting"},
         {"tools", tools_}};
  if (!era_.empty()) j["era"] = era_;
  if (!error_.empty()) j["error"] = error_;
  return j;
}

bool McpUpstream::Settled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ != State::kStarting;
}

bool McpUpstream::WaitReady(int ms, std::string* why) const {
  std::unique_lock<std::mutex> lock(mu_);
  // A server (re)starting may be ready within the wait; one that is down
  // fails the call at once (it is restarted in the background).
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return state_ != State::kStarting || stop_; });
  if (state_ == State::kReady) return true;
  *why = "upstream MCP server '" + spec_.name + "' is " + (state_ == State::kDown ? "down" : "starting") +
         (error_.empty() ? std::string() : ": " + error_);
  return false;
}

bool McpUpstream::Backoff(std::chrono::steady_clock::time_point up_since) {
  std::unique_lock<std::mutex> lock(mu_);
  if (std::chrono::steady_clock::now() - up_since > std::chrono::seconds(30))
    backoff_ = std::chrono::milliseconds(100);
  cv_.wait_for(lock, backoff_, [&] { return stop_; });
  backoff_ = std::min<std::chrono::milliseconds>(backoff_ * 2, std::chrono::seconds(10));
  return !stop_;
}

void McpUpstream::StopSupervisor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
}

McpUpstreams::McpUpstreams() = default;

McpUpstreams::~McpUpstreams() {
  std::map<std::string, std::shared_ptr<McpUpstream>> servers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    servers.swap(servers_);
  }
  for (auto& [name, s] : servers) s->Stop();
}

void McpUpstreams::Configure(const ExecutePolicy& policy) {
  std::vector<std::shared_ptr<McpUpstream>> stopped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::shared_ptr<McpUpstream>> next;
    for (const auto& spec : policy.mcp_servers) {
      auto it = servers_.find(spec.name);
      if (it != servers_.end() && it->second->spec() == spec) {
        next[spec.name] = it->second;
        continue;
      }
      next[spec.name] = spec.url.empty() ? StartStdioUpstream(spec, policy) : StartHttpUpstream(spec, policy);
    }
    for (auto& [name, s] : servers_) {
      auto it = next.find(name);
      if (it == next.end() || it->second != s) stopped.push_back(s);
    }
    servers_.swap(next);
  }
  // Outside the lock: a stop joins the supervisor. A call already holding
  // the old server gets E_UPSTREAM_UNAVAILABLE.
  for (auto& s : stopped) s->Stop();
}

bool McpUpstreams::Has(const std::string& server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return servers_.count(server) > 0;
}

Json McpUpstreams::Call(const std::string& server, const std::string& tool, const Json& args) const {
  std::shared_ptr<McpUpstream> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = servers_.find(server);
    if (it != servers_.end()) s = it->second;
  }
  if (!s)
    return ToolResultError(errc::kUpstreamUnavailable,
                           "no upstream MCP server '" + server + "' is configured", false);
  Json result;
  const tollgate::Status st =
      s->Request("tools/call", {{"name", tool}, {"arguments", args}}, s->spec().call_timeout_ms, &result);
  // A tool's own error or an answer we refuse would come again the same way.
  if (!st.ok()) {
    return ToolResultError(st.code(), st.message(),
                           st.code() != errc::kUpstreamToolError && st.code() != errc::kUpstreamProtocol);
  }
  const std::string who = "mcp:" + server + "/" + tool;
  if (!result.is_object()) {
    return ToolResultError(errc::kUpstreamProtocol, who + ": the upstream result is not an object", false);
  }
  if (result.contains("isError") && !result["isError"].is_boolean()) {
    return ToolResultError(errc::kUpstreamProtocol, who + ": the upstream result's isError is not a boolean",
                           false);
  }
  Json content =
      result.contains("content") && result["content"].is_array() ? result["content"] : Json::array();
  if (result.value("isError", false)) {
    // The tool's own words, as its text blocks say them (bounded).
    std::string text;
    for (const auto& c : content) {
      const bool is_text = c.is_object() && c.contains("type") && c["type"] == "text";
      if (is_text && c.contains("text") && c["text"].is_string()) {
        if (!text.empty()) text += "\n";
        text += c["text"].get<std::string>();
        if (text.size() > 2000) break;
      }
    }
    text = TruncateUtf8(text, 2000);
    if (text.empty()) text = "(no message)";
    return ToolResultError(errc::kUpstreamToolError, who + " failed: " + text, false);
  }
  Json data{{"content", std::move(content)}};
  if (result.contains("structuredContent") && result["structuredContent"].is_object()) {
    data["structuredContent"] = result["structuredContent"];
  }
  return ToolResultOk(std::move(data), 0);
}

Json McpUpstreams::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json out = Json::object();
  for (const auto& [name, s] : servers_) out[name] = s->StatusJson();
  return out;
}

bool McpUpstreams::WaitSettled(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool all = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [name, s] : servers_) all = all && s->Settled();
    }
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace tollgate
