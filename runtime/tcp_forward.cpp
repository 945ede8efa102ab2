#include "runtime/tcp_forward.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tollgate {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Copies both ways until either side closes; then closes both.
void Relay(int a, int b) {
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  char buf[64 << 10];
  for (;;) {
    if (poll(fds, 2, -1) < 0) break;
    bool done = false;
    for (int i = 0; i < 2 && !done; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        done = true;
        break;
      }
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = write(fds[1 - i].fd, buf + off, static_cast<size_t>(n - off));
        if (w <= 0) {
          done = true;
          break;
        }
        off += w;
      }
    }
    if (done) break;
  }
  close(a);
  close(b);
}

// "127.0.0.1:PORT" -> PORT, else 0.
int LoopbackTargetPort(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || target.substr(0, colon) != "127.0.0.1") return 0;
  int port = 0;
  const char* end = target.data() + target.size();
  auto [ptr, ec] = std::from_chars(target.data() + colon + 1, end, port);
  return ec == std::errc() && ptr == end && port > 0 && port <= 65535 ? port : 0;
}

// Whether a socket on this host listens on `port` (any address), from
// /proc/net/tcp and tcp6: with SO_REUSEPORT a bind test alone would not
// see a live listener that set it too.
bool ListeningOn(int port) {
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      if (state == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, want) == 0) return true;
    }
  }
  return false;
}

}  // namespace

bool CanListen(const std::string& host, int port) {
  if (port < 1 || port > 65535 || ListeningOn(port)) return false;
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (getaddrinfo(h.empty() ? nullptr : h.c_str(), std::to_string(port).c_str(), &hints, &res) != 0)
    return false;
  bool free = false;
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    // As tollgate's listeners bind: the forward with SO_REUSEADDR, the
    // HTTP API (cpp-httplib) with SO_REUSEPORT.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    free = bind(fd, res->ai_addr, res->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(res);
  return free;
}

Status TcpForward::Start(int port, const std::string& target, std::unique_ptr<TcpForward>* out) {
  const int target_port = LoopbackTargetPort(target);
  if (target_port == 0) {
    return Status::Error("E_INVALID_REQUEST", "forward target must be 127.0.0.1:PORT, not " + target);
  }
  if (port < 0 || port > 65535) {
    return Status::Error("E_INVALID_REQUEST", "a port is 0..65535, not " + std::to_string(port));
  }
  std::unique_ptr<TcpForward> f(new TcpForward());
  f->target_port_ = target_port;
  f->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (f->listen_fd_ >= 0) setsockopt(f->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = Loopback(port);
  if (f->listen_fd_ < 0 || bind(f->listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(f->listen_fd_, 64) != 0) {
    const std::string why = strerror(errno);
    if (f->listen_fd_ >= 0) close(f->listen_fd_);
    f->listen_fd_ = -1;
    return Status::Error("E_INVALID_REQUEST",
                         "cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + why);
  }
  socklen_t len = sizeof a;
  getsockname(f->listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  f->port_ = ntohs(a.sin_port);
  f->acceptor_ = std::thread([p = f.get()] { p->AcceptLoop(); });
  *out = std::move(f);
  return Status::Ok();
}

void TcpForward::AcceptLoop() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (relays_->load() >= kMaxRelays) {  // bounded: one thread per relay
      close(client);
      continue;
    }
    const int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in t = Loopback(target_port_);
    if (connect(upstream, reinterpret_cast<sockaddr*>(&t), sizeof t) != 0) {
      close(upstream);
      close(client);
      continue;
    }
    relays_->fetch_add(1);
    std::thread([client, upstream, relays = relays_] {
      Relay(client, upstream);
      relays->fetch_sub(1);
    }).detach();
  }
}

TcpForward::~TcpForward() {
  stop_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

}  // namespace tollgate
