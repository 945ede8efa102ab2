// The SSRF guard's connection pinning, shared by http_request and the
// upstream MCP servers reached over HTTP (execute/net_guard.h classifies
// addresses; this resolves and pins):
// - PinHost resolves a URL's host once; every address must be allowed
//   (global, or inside allow_cidrs) and the first becomes the pin;
// - curl is then told to use that address only (CURLOPT_RESOLVE with
//   PinnedResolveEntry) and OpenPinnedSocket, its open-socket callback,
//   checks the actual sockaddr again, so nothing curl resolves by itself
//   and no DNS rebinding gets through.
// Thread-safe (each call owns its Pin).
#pragma once

#include <curl/curl.h>

#include <string>
#include <vector>

#include "execute/net_guard.h"

namespace tollgate {

struct Pin {
  IpAddr addr;
  const std::vector<Cidr>* allow = nullptr;
  std::string refused;  // set by OpenPinnedSocket when it refuses
};

enum class PinResult { kOk, kForbidden, kUnresolved };

// `host` as a URL holds it (an IPv6 literal in brackets). kForbidden: an
// address it resolves to is not allowed (or it names an IPv6 zone);
// kUnresolved: no address. *why says why for a person.
PinResult PinHost(const std::string& host, const std::vector<Cidr>& allow, Pin* pin, std::string* why);

// "host:port:address" for CURLOPT_RESOLVE.
std::string PinnedResolveEntry(const std::string& host, const std::string& port, const Pin& pin);

// Sets up `c` to connect to the pinned address only: CURLOPT_RESOLVE with
// `resolve` (a list holding PinnedResolveEntry), OpenPinnedSocket, http(s)
// only, no proxy from the environment, no redirects followed by curl.
void PinConnection(CURL* c, curl_slist* resolve, Pin* pin);

// CURLOPT_OPENSOCKETFUNCTION; clientp is the Pin.
curl_socket_t OpenPinnedSocket(void* clientp, curlsocktype, curl_sockaddr* a);

// ${env:NAME} in a configured value replaced by tollgate's environment;
// false (and *missing = NAME) when NAME is unset.
bool ExpandEnv(const std::string& in, std::string* out, std::string* missing);

}  // namespace tollgate
