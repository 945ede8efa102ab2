// One HTTP call to an endpoint the operator configured (web search's Brave
// API, memory reflect's chat-completions server, list_llm_models' Ollama
// server), shared by the tools that call one. The URL is the operator's,
// never an agent's, yet it is held to http_request's SSRF guard all the
// same (execute/net_pin.h): every address it resolves to must be global
// or in execute.network.allow_cidrs, the connection is pinned to it, and
// no redirect is followed (a 3xx is an E_HTTP_STATUS). A misconfigured or
// hijacked DNS name then cannot point the executor at its own metadata
// service; a local model server needs its CIDR allowed.
//
// Headers may carry secrets (an API key): they are sent, never put in an
// error message; messages name the endpoint without its query string.
// Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "execute/net_guard.h"

namespace tollgate {

struct EndpointCall {
  std::string what;  // for messages: "the search endpoint"
  std::string url;   // absolute http(s)
  std::string method = "GET";
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent when not empty (POST)
  int timeout_ms = 30000;
  size_t max_bytes = 4 << 20;  // a longer answer is E_TOO_LARGE
};

struct EndpointAnswer {
  long status = 0;
  std::string body;
  Json json;  // the body parsed (ParseInputJson) when it is JSON
};

// True with *answer for a 2xx answer whose body is JSON; otherwise false
// with *error the ToolResult: E_URL_FORBIDDEN (the guard), E_HTTP_TIMEOUT,
// E_HTTP_ERROR (connection, not JSON), E_HTTP_STATUS (not 2xx; recoverable
// for 5xx and 429), E_TOO_LARGE.
bool CallEndpoint(const EndpointCall& call, const std::vector<Cidr>& allow, EndpointAnswer* answer,
                  Json* error);

}  // namespace tollgate
