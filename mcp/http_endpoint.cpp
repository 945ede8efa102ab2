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

// A refusal for a cap (docs/mcp.md, "Limits"): the code in the message and
// in error.data, so a client (or its user) can tell which.
HttpReply LimitFailure(int status, const Json& id, const std::string& code, const std::string& message) {
  HttpReply r = JsonReply(status, Error(id, kInternalError, code + ": " + message, Json{{"code", code}}));
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace

struct HttpEndpoint::Busy {
  HttpEndpoint* ep;
  std::string id;
  AgentKey who;
  bool stream;
  ~Busy() {
    std::lock_guard<std::mutex> lock(ep->mu_);
    if (auto it = ep->sessions_.find(id); it != ep->sessions_.end()) {
      --it->second.busy;
      it->second.last_used = ep->Now();
    }
    if (!stream) {
      --ep->calls_;
      return;
    }
    --ep->stream_count_;
    if (auto s = ep->streams_.find(who); s != ep->streams_.end() && --s->second == 0) ep->streams_.erase(s);
  }
};

HttpEndpoint::HttpEndpoint(Gateway gateway, HttpEndpointLimits limits)
    : gw_(std::move(gateway)), limits_(std::move(limits)) {}

HttpEndpoint::Clock::time_point HttpEndpoint::Now() const {
  return limits_.clock ? limits_.clock() : Clock::now();
}

size_t HttpEndpoint::sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

size_t HttpEndpoint::sessions_of(const std::string& org, const std::string& agent) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_agent_.find({org, agent});
  return it == by_agent_.end() ? 0 : it->second.size();
}

Json HttpEndpoint::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"sessions", sessions_.size()},
          {"streams", stream_count_},
          {"calls", calls_},
          {"limits",
           {{"max_sessions", limits_.max_sessions},
            {"max_sessions_per_org", limits_.max_sessions_per_org},
            {"max_sessions_per_agent", limits_.max_sessions_per_agent},
            {"session_idle_s", limits_.session_idle.count()},
            {"max_streams_per_agent", limits_.max_streams_per_agent}}}};
}

void HttpEndpoint::Shutdown() {
  stopping_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, e] : sessions_) e.session->Close();
}

void HttpEndpoint::EraseLocked(std::map<std::string, Entry>::iterator it) {
  Entry& e = it->second;
  e.session->Close();
  const AgentKey who{e.org, e.agent};
  if (auto a = by_agent_.find(who); a != by_agent_.end()) {
    a->second.erase(it->first);
    if (a->second.empty()) by_agent_.erase(a);
  }
  if (auto o = per_org_.find(e.org); o != per_org_.end() && --o->second == 0) per_org_.erase(o);
  sessions_.erase(it);
}

bool HttpEndpoint::IdleLocked(const Entry& e, Clock::time_point now) const {
  return e.busy == 0 && now - e.last_used >= limits_.session_idle;
}

void HttpEndpoint::ExpireLocked(Clock::time_point now) {
  last_sweep_ = now;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (IdleLocked(it->second, now)) EraseLocked(it);
    it = next;
  }
}

void HttpEndpoint::ExpireIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(Now());
}

bool HttpEndpoint::EvictLruLocked(const std::vector<std::string>& ids) {
  auto best = sessions_.end();
  for (const std::string& id : ids) {
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second.busy > 0) continue;
    if (best == sessions_.end() || it->second.last_used < best->second.last_used) best = it;
  }
  if (best == sessions_.end()) return false;
  EraseLocked(best);
  return true;
}

std::shared_ptr<HttpEndpoint::Busy> HttpEndpoint::Hold(const std::string& id, const AgentKey& who,
                                                       bool stream) {
  // With mu_ held by the caller.
  auto it = sessions_.find(id);
  if (it != sessions_.end()) ++it->second.busy;
  if (stream) {
    ++streams_[who];
    ++stream_count_;
  } else {
    ++calls_;
  }
  return std::shared_ptr<Busy>(new Busy{this, id, who, stream});
}

HttpReply HttpEndpoint::Handle(const HttpCall& call) {
  if (!OriginAllowed(call)) return RpcFailure(403, nullptr, kInvalidRequest, "Origin not allowed");
  if (stopping_) return RpcFailure(503, nullptr, kInternalError, "shutting down");
  const std::string version = call.header("MCP-Protocol-Version");
  if (IsModernVersion(version) && call.method != "POST") {
    HttpReply r = RpcFailure(405, nullptr, kInvalidRequest, "revision " + version + " uses POST only");
    r.headers.emplace_back("Allow", "POST");
    return r;
  }
  // A version no era knows: refused here, unless the body is a modern
  // request (its envelope then answers -32022 with what is supported).
  if (!version.empty() && !IsModernVersion(version) && NegotiateVersion(version) != version &&
      !(call.method == "POST" && ReadEnvelope(Parse(call.body).params).modern)) {
    return RpcFailure(400, nullptr, kInvalidRequest, "unsupported MCP-Protocol-Version " + version);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Now();
    if (now - last_sweep_ >= std::chrono::seconds(1)) ExpireLocked(now);
  }
  if (call.method == "POST") return Post(call);
  if (call.method == "GET") return Get(call);
  if (call.method == "DELETE") {
    HttpReply refused;
    auto s = Find(call, &refused);
    if (!s) return refused;
    // The client ends its session: calls of it still waiting are given up.
    s->End();
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = sessions_.find(s->id()); it != sessions_.end()) EraseLocked(it);
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
  const auto now = Now();
  if (IdleLocked(it->second, now)) {
    EraseLocked(it);
    *refused =
        RpcFailure(404, nullptr, kInvalidRequest, "the session ended after being idle; initialize a new one");
    return nullptr;
  }
  it->second.last_used = now;
  return it->second.session;
}

HttpReply HttpEndpoint::Initialize(const HttpCall& call, const Incoming& in) {
  const std::string id = NewSessionId();
  auto session = std::make_shared<Session>(gw_, Who{call.org, call.agent, id, "transport", call.auth}, id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const AgentKey who{call.org, call.agent};
    // The agent's own cap first: at it, its least recently used idle
    // session makes room, so an agent only ever displaces itself.
    auto mine = by_agent_.find(who);
    if (mine != by_agent_.end() && mine->second.size() >= limits_.max_sessions_per_agent &&
        !EvictLruLocked({mine->second.begin(), mine->second.end()})) {
      return LimitFailure(429, in.id, "E_TOO_MANY_SESSIONS",
                          "agent '" + call.agent + "' has " + std::to_string(limits_.max_sessions_per_agent) +
                              " sessions, each with a stream or call open; end one (DELETE) first");
    }
    if (auto o = per_org_.find(call.org); o != per_org_.end() && o->second >= limits_.max_sessions_per_org) {
      std::vector<std::string> ids;
      for (const auto& [sid, e] : sessions_) {
        if (e.org == call.org) ids.push_back(sid);
      }
      if (!EvictLruLocked(ids)) {
        return LimitFailure(429, in.id, "E_TOO_MANY_SESSIONS",
                            "org '" + call.org + "' has " + std::to_string(limits_.max_sessions_per_org) +
                                " sessions in use; end one (DELETE) first");
      }
    }
    if (sessions_.size() >= limits_.max_sessions) ExpireLocked(Now());
    if (sessions_.size() >= limits_.max_sessions) {
      return LimitFailure(503, in.id, "E_TOO_MANY_SESSIONS",
                          "the gateway holds as many MCP sessions as it may");
    }
    sessions_[id] = {session, call.org, call.agent, Now(), 0};
    by_agent_[who].insert(id);
    ++per_org_[call.org];
  }
  Json answer;
  session->Handle(in, [&answer](const Json& m) { answer = m; });
  HttpReply r = JsonReply(200, answer);
  r.headers.emplace_back("Mcp-Session-Id", id);
  return r;
}

HttpReply HttpEndpoint::Post(const HttpCall& call) {
  Incoming in = Parse(call.body);
  if (in.kind == Incoming::Kind::kInvalid) return RpcFailure(400, in.id, in.error_code, in.error_message);
  const Envelope env = ReadEnvelope(in.params);
  if (env.modern || IsModernVersion(call.header("MCP-Protocol-Version"))) return PostModern(call, in, env);
  if (in.kind == Incoming::Kind::kRequest && in.method == "initialize") return Initialize(call, in);

  HttpReply refused;
  auto session = Find(call, &refused);
  if (!session) return refused;
  const std::string id = session->id();
  return Serve(call, std::move(session), std::move(in), id);
}

HttpReply HttpEndpoint::Serve(const HttpCall& call, std::shared_ptr<Session> session, Incoming in,
                              const std::string& busy_id) {
  if (in.kind != Incoming::Kind::kRequest) {
    session->Handle(in, [](const Json&) {});
    HttpReply r;
    r.status = 202;
    return r;
  }
  const bool listen = in.method == "subscriptions/listen";
  if (in.method != "tools/call" && !listen) {
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
  std::shared_ptr<Busy> busy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A listen is a standing stream, capped as GET streams are.
    const AgentKey who{call.org, call.agent};
    auto open = streams_.find(who);
    if (listen && open != streams_.end() && open->second >= limits_.max_streams_per_agent) {
      return LimitFailure(429, in.id, "E_TOO_MANY_STREAMS",
                          "agent '" + call.agent + "' has " + std::to_string(limits_.max_streams_per_agent) +
                              " event streams open; close one first");
    }
    busy = Hold(busy_id, who, listen);
  }
  // tools/call: an event stream, so progress can precede the result.
  HttpReply r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Accel-Buffering", "no");
  r.stream = [session, in, gone = call.gone, busy](const std::function<bool(const std::string&)>& write) {
    session->Handle(
        in, [&write](const Json& m) { write(SseEvent(m)); }, gone);
  };
  return r;
}

namespace {

// The 2026-07-28 header checks: each header the body's request needs,
// present and saying what the body says. "" when they hold.
std::string HeaderMismatch(const HttpCall& call, const Incoming& in, const Envelope& env) {
  const std::string version = call.header("MCP-Protocol-Version");
  if (version.empty()) return "the required MCP-Protocol-Version header is absent";
  if (version != env.version)
    return "the body names protocol version " + env.version + " but the MCP-Protocol-Version header names " +
           version;
  if (in.kind != Incoming::Kind::kRequest) return "";  // notifications are exempt
  const std::string method = DecodeHeaderValue(call.header("Mcp-Method"));
  if (method.empty()) return "the required Mcp-Method header is absent";
  if (method != in.method)
    return "the body names method " + in.method + " but the Mcp-Method header names " + method;
  const char* field = in.method == "tools/call"           ? "name"
                      : in.method.rfind("tasks/", 0) == 0 ? "taskId"
                                                          : nullptr;
  if (field == nullptr) return "";
  const std::string name = DecodeHeaderValue(call.header("Mcp-Name"));
  if (name.empty()) return "the required Mcp-Name header is absent";
  const Json body = in.params.value(field, Json());
  if (!body.is_string() || body.get<std::string>() != name)
    return std::string("the body carries params.") + field + " other than the Mcp-Name header's " + name;
  return "";
}

}  // namespace

HttpReply HttpEndpoint::PostModern(const HttpCall& call, Incoming in, const Envelope& env) {
  if (!env.modern) {
    return RpcFailure(400, in.id, kInvalidParams,
                      "the MCP-Protocol-Version header names revision " +
                          call.header("MCP-Protocol-Version") +
                          ", but the request has no _meta envelope (io.modelcontextprotocol/protocolVersion, "
                          "io.modelcontextprotocol/clientCapabilities)");
  }
  if (env.error_code != 0)
    return JsonReply(400, Error(in.id, env.error_code, env.error_message, env.error_data));
  if (std::string why = HeaderMismatch(call, in, env); !why.empty())
    return RpcFailure(400, in.id, kHeaderMismatch, "the request headers and body disagree: " + why);
  if (in.kind == Incoming::Kind::kRequest && !Session::ServesModern(in.method))
    return RpcFailure(404, in.id, kMethodNotFound, "method '" + in.method + "' is not served");
  if (in.method.rfind("tasks/", 0) == 0 && !env.tasks) {
    return JsonReply(400, MissingTasksError(in.id));
  }
  // No session: each request is served on its own, for the token's agent.
  // A client without a session name of its own has one per agent.
  auto session = std::make_shared<Session>(
      gw_, Who{call.org, call.agent, "agent-" + call.agent, "agent", call.auth}, NewSessionId());
  // A notification is 202 (a modern client cancels by closing its stream).
  return Serve(call, std::move(session), std::move(in), "");
}

HttpReply HttpEndpoint::Get(const HttpCall& call) {
  if (call.header("Accept").find("text/event-stream") == std::string::npos) {
    return RpcFailure(406, nullptr, kInvalidRequest, "GET /mcp serves text/event-stream only");
  }
  HttpReply refused;
  auto session = Find(call, &refused);
  if (!session) return refused;
  std::shared_ptr<Busy> busy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const AgentKey who{call.org, call.agent};
    auto open = streams_.find(who);
    if (open != streams_.end() && open->second >= limits_.max_streams_per_agent) {
      return LimitFailure(429, nullptr, "E_TOO_MANY_STREAMS",
                          "agent '" + call.agent + "' has " + std::to_string(limits_.max_streams_per_agent) +
                              " event streams open (GET /mcp); close one first");
    }
    busy = Hold(session->id(), who, true);
  }
  HttpReply r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.stream = [this, session, gone = call.gone, busy](const std::function<bool(const std::string&)>& write) {
    auto next_keepalive = std::chrono::steady_clock::now();
    while (!stopping_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (sessions_.find(session->id()) == sessions_.end()) return;
      }
      // A client that hung up, or whose token was revoked, is done.
      if (gone && gone()) return;
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
