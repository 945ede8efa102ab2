#include "execute/net_pin.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <regex>

namespace tollgate {

namespace {
std::string Unbracketed(const std::string& host) {
  return host.size() > 2 && host.front() == '[' ? host.substr(1, host.size() - 2) : host;
}
}  // namespace

PinResult PinHost(const std::string& url_host, const std::vector<Cidr>& allow, Pin* pin, std::string* why) {
  const std::string host = Unbracketed(url_host);
  if (host.find('%') != std::string::npos) {
    *why = "IPv6 zone ids are not allowed";
    return PinResult::kForbidden;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (gai != 0) {
    *why = "cannot resolve " + host + ": " + gai_strerror(gai);
    return PinResult::kUnresolved;
  }
  pin->allow = &allow;
  bool have = false;
  std::string refused, reason;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    IpAddr ip;
    if (!FromSockaddr(a->ai_addr, &ip)) continue;
    if (!AddressAllowed(ip, allow, &reason)) refused = reason;
    if (!have) pin->addr = ip, have = true;
  }
  freeaddrinfo(res);
  if (!refused.empty()) {
    *why = url_host + " resolves to a forbidden address: " + refused;
    return PinResult::kForbidden;
  }
  if (!have) {
    *why = "no address for " + host;
    return PinResult::kUnresolved;
  }
  return PinResult::kOk;
}

std::string PinnedResolveEntry(const std::string& url_host, const std::string& port, const Pin& pin) {
  const std::string addr = pin.addr.v6 ? "[" + pin.addr.ToString() + "]" : pin.addr.ToString();
  return Unbracketed(url_host) + ":" + port + ":" + addr;
}

curl_socket_t OpenPinnedSocket(void* clientp, curlsocktype, curl_sockaddr* a) {
  Pin* pin = static_cast<Pin*>(clientp);
  IpAddr got;
  std::string why;
  if (!FromSockaddr(&a->addr, &got)) {
    pin->refused = "not an IP socket";
    return CURL_SOCKET_BAD;
  }
  if (!AddressAllowed(got, *pin->allow, &why)) {
    pin->refused = why;
    return CURL_SOCKET_BAD;
  }
  if (got.v6 != pin->addr.v6 || got.b != pin->addr.b) {
    pin->refused = "connection to " + got.ToString() + " instead of the checked " + pin->addr.ToString();
    return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype, a->protocol);
}

void PinConnection(CURL* c, curl_slist* resolve, Pin* pin) {
  curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, OpenPinnedSocket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, pin);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
}

bool ExpandEnv(const std::string& in, std::string* out, std::string* missing) {
  static const std::regex re(R"(\$\{env:([A-Za-z_][A-Za-z0-9_]*)\})");
  out->clear();
  auto begin = std::sregex_iterator(in.begin(), in.end(), re);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out->append(in, last, it->position() - last);
    const char* v = std::getenv((*it)[1].str().c_str());
    if (v == nullptr) {
      *missing = (*it)[1].str();
      return false;
    }
    out->append(v);
    last = it->position() + it->length();
  }
  out->append(in, last, std::string::npos);
  return true;
}

}  // namespace tollgate
