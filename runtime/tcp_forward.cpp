#include "runtime/tcp_forward.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

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

}  // namespace

Status TcpForward::Start(int port, const std::string& target, std::unique_ptr<TcpForward>* out) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || target.substr(0, colon) != "127.0.0.1") {
    return Status::Error("E_INVALID_REQUEST", "forward target must be 127.0.0.1:PORT, not " + target);
  }
  std::unique_ptr<TcpForward> f(new TcpForward());
  f->target_port_ = std::atoi(target.c_str() + colon + 1);
  f->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(f->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = Loopback(port);
  if (bind(f->listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(f->listen_fd_, 64) != 0) {
    const std::string why = strerror(errno);
    close(f->listen_fd_);
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
    const int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in t = Loopback(target_port_);
    if (connect(upstream, reinterpret_cast<sockaddr*>(&t), sizeof t) != 0) {
      close(upstream);
      close(client);
      continue;
    }
    std::thread([client, upstream] { Relay(client, upstream); }).detach();
  }
}

TcpForward::~TcpForward() {
  stop_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

}  // namespace tollgate
