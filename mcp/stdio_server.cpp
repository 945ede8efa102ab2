#include "mcp/stdio_server.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace tollgate::mcp {

namespace {

class Output {
 public:
  explicit Output(int fd) : fd_(fd) {}
  void Send(const Json& msg) {
    std::string line = msg.dump(-1, ' ', false, Json::error_handler_t::replace);
    line.push_back('\n');
    std::lock_guard<std::mutex> lock(mu_);
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the client is gone; reading stdin ends us
      off += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  std::mutex mu_;
};

}  // namespace

int ServeStdio(Session& session, int in_fd, int out_fd, std::chrono::milliseconds watch_every) {
  Output out(out_fd);
  auto send = [&out](const Json& m) { out.Send(m); };
  // Calls in flight; finished ones are joined as new ones start.
  struct Call {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Call> calls;

  // The list_changed watcher.
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  bool done = false;
  std::thread watcher([&] {
    std::unique_lock<std::mutex> lock(watch_mu);
    while (!done) {
      watch_cv.wait_for(lock, watch_every);
      if (done || !session.initialized()) continue;
      lock.unlock();
      if (session.ToolsChanged()) out.Send(Notification("notifications/tools/list_changed", Json::object()));
      lock.lock();
    }
  });

  std::string buf, line;
  bool skipping = false;  // inside an over-long line
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(in_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (skipping) {
        skipping = false;
        continue;
      }
      line.assign(buf, start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      Incoming in = Parse(line);
      // Calls and listens wait (for approvers, for changes): each on a
      // thread of its own.
      if (in.kind == Incoming::Kind::kRequest &&
          (in.method == "tools/call" || in.method == "subscriptions/listen")) {
        calls.remove_if([](Call& c) {
          if (!c.done->load()) return false;
          c.thread.join();
          return true;
        });
        auto done = std::make_shared<std::atomic<bool>>(false);
        calls.push_back({std::thread([&session, in, send, done] {
                           session.Handle(in, send);
                           *done = true;
                         }),
                         done});
      } else {
        session.Handle(in, send);
      }
    }
    buf.erase(0, start);
    if (buf.size() > kMaxStdioMessageBytes) {
      if (!skipping) {
        out.Send(Error(nullptr, kInvalidRequest,
                       "message over " + std::to_string(kMaxStdioMessageBytes) + " bytes; skipped"));
      }
      skipping = true;
      buf.clear();
    }
  }
  // End of stdin: the client is gone, and so are its calls still waiting.
  session.End();
  {
    std::lock_guard<std::mutex> lock(watch_mu);
    done = true;
  }
  watch_cv.notify_all();
  watcher.join();
  for (auto& c : calls) c.thread.join();
  return 0;
}

}  // namespace tollgate::mcp
