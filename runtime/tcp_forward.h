// TcpForward: accepts on 127.0.0.1:PORT and relays each connection, byte for
// byte, to a target on 127.0.0.1. `tollgate broker --port P` uses it to give
// the embedded broker (whose listener port librdkafka picks) a fixed
// bootstrap address: clients bootstrap through P, then connect to the
// broker address its metadata advertises.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace tollgate {

class TcpForward {
 public:
  // `target`: "127.0.0.1:PORT". Listens before returning.
  static Status Start(int port, const std::string& target, std::unique_ptr<TcpForward>* out);
  ~TcpForward();
  int port() const { return port_; }

 private:
  TcpForward() = default;
  void AcceptLoop();
  int listen_fd_ = -1;
  int port_ = 0;
  int target_port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
};

}  // namespace tollgate
