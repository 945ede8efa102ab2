#include "execute/mcp_upstream.h"

#include "execute/mcp_upstream_internal.h"
#include "execute/tool.h"

namespace tollgate {

Json McpInitializeParams() {
  return {{"protocolVersion", kMcpClientVersion},
          {"capabilities", Json::object()},
          {"clientInfo", {{"name", "tollgate"}, {"version", "1"}}}};
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = s;
    if (s == State::kReady) {
      error_.clear();
    } else if (!error.empty()) {
      error_ = error;
    }
  }
  cv_.notify_all();
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
