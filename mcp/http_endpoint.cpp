#include "mcp/http_endpoint.h"

#include <chrono>
#include <random>
#include <thread>

#include "core/trace.h"

namespace tollgate::mcp {

namespace {

HttpReply JsonReply(int status, const Json& body) {
  HttpReply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  return r;
}

HttpReply RpcFailure(int status, const Json& id, int code, const std::string& message) {
  return JsonReply(status, Error(id, code, message));
}

std::string NewSessionId() {
  std::random_device rd;
  char buf[48];
  std::snprintf(buf, sizeof buf, "mcp-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

// A browser's Origin must be a loopback one or this host's own: otherwise a
// page the agent's user visits could drive the gateway (DNS rebinding).
bool OriginAllowed(const HttpCall& call) {
  const std::string origin = call.header("Origin");
  if (origin.empty()) return true;
  const size_t scheme = origin.find("://");
  if (scheme == std::string::npos) return false;
  std::string host = origin.substr(scheme + 3);
  if (host == call.header("Host")) return true;
  if (!host.empty() && host.front() == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

std::string SseEvent(const Json& m) {
  return "event: message\ndata: " + m.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

}  // namespace

HttpEndpoint::HttpEndpoint(Gateway gateway, size_t max_sessions)
    : gw_(std::move(gateway)), max_sessions_(max_sessions) {}

size_t HttpEndpoint::sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

void HttpEndpoint::Shutdown() {
  stopping_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, e] : sessions_) e.session->Close();
}

HttpReply HttpEndpoint::Handle(const HttpCall& call) {
  if (!OriginAllowed(call)) return RpcFailure(403, nullptr, kInvalidRequest, "Origin not allowed");
  if (stopping_) return RpcFailure(503, nullptr, kInternalError, "shutting down");
  const std::string version = call.header("MCP-Protocol-Version");
  if (!version.empty() && NegotiateVersion(version) != version) {
    return RpcFailure(400, nullptr, kInvalidRequest, "unsupported MCP-Protocol-Version " + version);
  }
  if (call.method == "POST") return Post(call);
  if (call.method == "GET") return Get(call);
  if (call.method == "DELETE") {
    HttpReply refused;
    auto s = Find(call, &refused);
    if (!s) return refused;
    s->Close();
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(s->id());
    HttpReply r;
    r.status = 204;
    return r;
  }
  HttpReply r = RpcFailure(405, nullptr, kInvalidRequest, "use POST, GET or DELETE");
  r.headers.emplace_back("Allow", "GET, POST, DELETE");
  return r;
}

std::shared_ptr<Session> HttpEndpoint::Find(const HttpCall& call, HttpReply* refused) {
  const std::string id = call.header("Mcp-Session-Id");
  if (id.empty()) {
    *refused = RpcFailure(400, nullptr, kInvalidRequest, "missing Mcp-Session-Id (initialize first)");
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  // Another agent's session is as unknown as one that never was.
  if (it == sessions_.end() || it->second.org != call.org || it->second.agent != call.agent) {
    *refused = RpcFailure(404, nullptr, kInvalidRequest, "no such session; initialize a new one");
    return nullptr;
  }
  return it->second.session;
}

HttpReply HttpEndpoint::Post(const HttpCall& call) {
  Incoming in = Parse(call.body);
  if (in.kind == Incoming::Kind::kInvalid) return RpcFailure(400, in.id, in.error_code, in.error_message);

  if (in.kind == Incoming::Kind::kRequest && in.method == "initialize") {
    const std::string id = NewSessionId();
    auto session = std::make_shared<Session>(gw_, Who{call.org, call.agent, id}, id);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (sessions_.size() >= max_sessions_) {
        return RpcFailure(503, in.id, kInternalError, "too many MCP sessions; end one (DELETE) first");
      }
      sessions_[id] = {session, call.org, call.agent};
    }
    Json answer;
    session->Handle(in, [&answer](const Json& m) { answer = m; });
    HttpReply r = JsonReply(200, answer);
    r.headers.emplace_back("Mcp-Session-Id", id);
    return r;
  }

  HttpReply refused;
  auto session = Find(call, &refused);
  if (!session) return refused;
  if (in.kind != Incoming::Kind::kRequest) {
    session->Handle(in, [](const Json&) {});
    HttpReply r;
    r.status = 202;
    return r;
  }
  if (in.method != "tools/call") {
    Json answer;
    session->Handle(in, [&answer](const Json& m) { answer = m; });
    return JsonReply(200, answer);
  }
  // The HTTP traceparent header stands for params._meta.traceparent when
  // the call has no valid one of its own (docs/mcp.md).
  if (const std::string tp = call.header("traceparent");
      IsValidTraceparent(tp) && in.params.is_object() && MetaTraceparent(in.params).empty()) {
    Json& meta = in.params["_meta"];
    if (!meta.is_object()) meta = Json::object();
    meta["traceparent"] = tp;
  }
  // tools/call: an event stream, so progress can precede the result.
  HttpReply r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.stream = [session, in](const std::function<bool(const std::string&)>& write) {
    session->Handle(in, [&write](const Json& m) { write(SseEvent(m)); });
  };
  return r;
}

HttpReply HttpEndpoint::Get(const HttpCall& call) {
  if (call.header("Accept").find("text/event-stream") == std::string::npos) {
    return RpcFailure(406, nullptr, kInvalidRequest, "GET /mcp serves text/event-stream only");
  }
  HttpReply refused;
  auto session = Find(call, &refused);
  if (!session) return refused;
  HttpReply r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.stream = [this, session](const std::function<bool(const std::string&)>& write) {
    auto next_keepalive = std::chrono::steady_clock::now();
    while (!stopping_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (sessions_.find(session->id()) == sessions_.end()) return;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_keepalive) {
        if (!write(": keepalive\n\n")) return;
        next_keepalive = now + std::chrono::seconds(15);
      }
      if (session->ToolsChanged() &&
          !write(SseEvent(Notification("notifications/tools/list_changed", Json::object())))) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  };
  return r;
}

}  // namespace tollgate::mcp
