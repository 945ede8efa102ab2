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
//   DELETE ends the session.
//
// A session belongs to the (org, agent) of the token that made it: another
// token naming it gets 404, as an unknown session does. An Origin header
// that is not this host's or a loopback origin is refused (403): a web page
// must not drive a local gateway (DNS rebinding).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mcp/session.h"

namespace tollgate::mcp {

struct HttpCall {
  std::string method;  // POST | GET | DELETE
  std::string body;
  std::function<std::string(const std::string&)> header;  // "" when absent
  std::string org, agent;  // the agent token's binding
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

class HttpEndpoint {
 public:
  explicit HttpEndpoint(Gateway gateway, size_t max_sessions = 4096);
  HttpReply Handle(const HttpCall& call);
  // Ends every session and stream (before the server stops, so no worker
  // stays in a stream).
  void Shutdown();
  size_t sessions() const;

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    std::string org, agent;
  };
  HttpReply Post(const HttpCall& call);
  HttpReply Get(const HttpCall& call);
  std::shared_ptr<Session> Find(const HttpCall& call, HttpReply* refused);

  const Gateway gw_;
  const size_t max_sessions_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> sessions_;
  std::atomic<bool> stopping_{false};
};

}  // namespace tollgate::mcp
