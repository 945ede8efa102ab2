// The Streamable HTTP transport of MCP (spec revision 2025-06-18 and later)
// at /mcp, without the HTTP library: api/http_api.cpp authenticates the
// bearer token and maps an HttpCall to and from httplib.
//
//   POST   one JSON-RPC message. initialize makes a session (its id in the
//          Mcp-Session-Id header, also the tollgate session_id of its
//          calls); every later message names it. A request is answered as
//          JSON, except tools/call, answered as an event stream so progress
//          notifications can come before the result. Notifications and
//          responses: 202. A tools/call's `traceparent` header is its
//          trace context unless params._meta.traceparent has a valid one.
//   GET    an event stream of the session's server notifications
//          (notifications/tools/list_changed), kept alive by comments.
//   DELETE ends the session; its calls still waiting are withdrawn.
//
// A 2026-07-28 request (its version in params._meta) needs no session: it
// is checked against its headers (MCP-Protocol-Version, Mcp-Method, and
// Mcp-Name for tools/call and tasks/*: 400 -32020 when absent or not the
// body's), served by a session of its own for (org, agent), and answered as
// JSON (tools/call: an event stream). An unknown method is 404 -32601; an
// Mcp-Session-Id it carries is ignored.
//
// A session belongs to the (org, agent) of the token that made it: another
// token naming it gets 404, as an unknown session does. Sessions end when
// idle (HttpEndpointLimits::session_idle) and are capped per agent, per org
// and in all; GET streams are capped per agent (docs/mcp.md, "Limits"). An
// Origin header that is not this host's or a loopback origin is refused
// (403): a web page must not drive a local gateway (DNS rebinding).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "mcp/session.h"

namespace tollgate::mcp {

struct HttpCall {
  std::string method;  // POST | GET | DELETE
  std::string body;
  std::function<std::string(const std::string&)> header;  // "" when absent
  std::string org, agent;                                 // the agent token's binding
  // While a stream runs: true once the client has hung up or its token no
  // longer authenticates (revoked). A GET stream then ends; a tools/call
  // waiting for its result ends and withdraws its pending approval, as
  // notifications/cancelled does. Null: never.
  std::function<bool()> gone;
  Json auth;  // how it authenticated, when by OAuth (Who::auth); null otherwise
};

struct HttpReply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "application/json";
  std::string body;
  // Set for an event stream: runs on the connection's thread; `write`
  // returns false once the client is gone.
  std::function<void(const std::function<bool(const std::string&)>& write)> stream;
};

// What one agent, one org and everyone together may hold (docs/mcp.md,
// "Limits"). At an agent's or an org's session cap, initialize ends that
// agent's (org's) least recently used idle session to make room; when none
// is idle (each has a stream or a call in flight) it is refused, 429
// E_TOO_MANY_SESSIONS (503 at the global cap).
struct HttpEndpointLimits {
  size_t max_sessions = 4096;
  size_t max_sessions_per_org = 1024;
  size_t max_sessions_per_agent = 64;
  // A session with no message, stream or call for this long ends (its id
  // is then 404, and the client initializes a new one).
  std::chrono::seconds session_idle{1800};
  // Open GET event streams of one (org, agent); more: 429 E_TOO_MANY_STREAMS.
  size_t max_streams_per_agent = 4;
  // The clock of idleness (tests inject one); steady_clock when null.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class HttpEndpoint {
 public:
  explicit HttpEndpoint(Gateway gateway, HttpEndpointLimits limits = {});
  HttpReply Handle(const HttpCall& call);
  // Ends every session and stream (before the server stops, so no worker
  // stays in a stream).
  void Shutdown();
  // Ends the sessions idle longer than session_idle (Handle does this
  // too, at most once a second).
  void ExpireIdle();
  size_t sessions() const;
  // {sessions, streams, calls (tools/call in flight), limits}.
  Json Stats() const;
  // Sessions of one (org, agent).
  size_t sessions_of(const std::string& org, const std::string& agent) const;

 private:
  using Clock = std::chrono::steady_clock;
  using AgentKey = std::pair<std::string, std::string>;  // (org, agent)
  struct Entry {
    std::shared_ptr<Session> session;
    std::string org, agent;
    Clock::time_point last_used;
    int busy = 0;  // streams and calls in flight: never ended for idleness
  };
  // Holds a session busy while a stream or call runs (released with the
  // reply's stream, whether or not it ran).
  struct Busy;
  HttpReply Post(const HttpCall& call);
  HttpReply PostModern(const HttpCall& call, Incoming in, const Envelope& env);
  // Answers `in` with `session`: a notification 202, a request as JSON, a
  // tools/call as an event stream (held busy under `busy_id`).
  HttpReply Serve(const HttpCall& call, std::shared_ptr<Session> session, Incoming in,
                  const std::string& busy_id);
  HttpReply Get(const HttpCall& call);
  HttpReply Initialize(const HttpCall& call, const Incoming& in);
  std::shared_ptr<Session> Find(const HttpCall& call, HttpReply* refused);
  std::shared_ptr<Busy> Hold(const std::string& id, const AgentKey& who, bool stream);
  Clock::time_point Now() const;
  // With mu_ held.
  void EraseLocked(std::map<std::string, Entry>::iterator it);
  void ExpireLocked(Clock::time_point now);
  bool IdleLocked(const Entry& e, Clock::time_point now) const;
  // Ends the least recently used idle session among `ids`; false if none.
  bool EvictLruLocked(const std::vector<std::string>& ids);

  const Gateway gw_;
  const HttpEndpointLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> sessions_;
  std::map<AgentKey, std::set<std::string>> by_agent_;
  std::map<std::string, size_t> per_org_;
  std::map<AgentKey, size_t> streams_;
  size_t stream_count_ = 0, calls_ = 0;
  Clock::time_point last_sweep_{};
  std::atomic<bool> stopping_{false};
};

}  // namespace tollgate::mcp
