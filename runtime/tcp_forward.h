// TcpForward: accepts on 127.0.0.1:PORT and relays each connection, byte for
// byte, to a target on 127.0.0.1. It gives the embedded broker (whose
// listener port librdkafka picks) a fixed bootstrap address
// (EmbeddedBroker::Start's bootstrap_port, `up --broker-port`, `broker
// --port`): clients bootstrap through PORT, then connect to the broker
// address its metadata advertises. At most kMaxRelays connections are
// relayed at once; one more is closed at accept.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace tollgate {

// Whether HOST:PORT can be listened on now: no socket of this host listens
// on PORT, and a bind test with the options tollgate's listeners set
// passes (connections of an earlier process still in TIME_WAIT do not
// count). HOST is an IP address, "localhost" or "[v6]"; PORT 1..65535.
bool CanListen(const std::string& host, int port);

class TcpForward {
 public:
  static constexpr int kMaxRelays = 256;
  // `target`: "127.0.0.1:PORT". Listens before returning; `port` 0: any
  // free port. E_INVALID_REQUEST when the port is taken or out of range.
  static Status Start(int port, const std::string& target, std::unique_ptr<TcpForward>* out);
  // Stops accepting; relays in progress end when either side closes.
  ~TcpForward();
  int port() const { return port_; }

 private:
  TcpForward() = default;
  void AcceptLoop();
  int listen_fd_ = -1;
  int port_ = 0;
  int target_port_ = 0;
  std::atomic<bool> stop_{false};
  // Relays running (shared with their detached threads, which may outlive this).
  std::shared_ptr<std::atomic<int>> relays_ = std::make_shared<std::atomic<int>>(0);
  std::thread acceptor_;
};

}  // namespace tollgate
