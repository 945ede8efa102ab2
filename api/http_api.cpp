#include "api/http_api.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include "api/console.h"
#include "api/http_api_impl.h"
#include "core/canonical_json.h"
#include "core/json_error.h"
#include "core/messages.h"
#include "core/sha256.h"
#include "mcp/protocol.h"
#include "replay/from_log.h"  // errc::kPolicyInvalid (StatusFor)

namespace tollgate {

bool ParseListen(const std::string& text, std::string* host, int* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  try {
    size_t used = 0;
    int p = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || p < 0 || p > 65535) return false;
    *host = text.substr(0, colon);
    *port = p;
    return true;
  } catch (...) {
    return false;
  }
}

namespace http_api {
namespace {

// A request (line, headers, body) must arrive within this, however slowly
// its bytes trickle in (its line and headers within the shorter
// FairShareLimits::header_deadline); each read and each write also waits at
// most kApiIoTimeout.
constexpr std::chrono::seconds kApiReadDeadline{10};
constexpr std::chrono::seconds kApiIoTimeout{5};
// Connections the kernel completes and holds before the server accepts.
constexpr int kListenBacklog = 1024;
// Idle worker threads beyond the busy ones end after this.
constexpr std::chrono::seconds kIdleWorker{10};

// The connection the calling worker thread serves (set around each
// request), so that Authorize can charge it to the token it checks.
struct CurrentConnection {
  ConnectionBudget* budget = nullptr;
  uint64_t id = 0;
  int sock = -1;
};
thread_local CurrentConnection tl_conn;

// A socket with deadlines on reading the request: httplib's own stream
// times out each read, so a client sending a byte every few seconds would
// hold its worker for ever. Until the blank line that ends the headers the
// (shorter) header deadline applies; `on_headers` runs once when it is seen.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, std::chrono::steady_clock::time_point header_deadline,
                 std::chrono::steady_clock::time_point read_deadline, std::function<void()> on_headers)
      : sock_(sock),
        header_deadline_(header_deadline),
        deadline_(read_deadline),
        on_headers_(std::move(on_headers)) {}
  bool is_readable() const override { return pos_ < len_ || Wait(POLLIN, ReadWaitMs()); }
  bool is_writable() const override { return Wait(POLLOUT, static_cast<int>(ToMs(kApiIoTimeout))); }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_) {
      if (!Wait(POLLIN, ReadWaitMs())) return -1;
      ssize_t n = ::recv(sock_, buf_, sizeof(buf_), 0);
      if (n <= 0) return n;
      pos_ = 0;
      len_ = static_cast<size_t>(n);
      ScanForHeadersEnd();
    }
    const size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return ::send(sock_, ptr, size, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  template <class D>
  static int64_t ToMs(D d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  }
  // The bytes just received: a CRLF CRLF (or LF LF) ends the headers.
  void ScanForHeadersEnd() {
    if (headers_done_) return;
    for (size_t i = 0; i < len_ && !headers_done_; ++i) {
      tail_ = (tail_ << 8) | static_cast<unsigned char>(buf_[i]);
      headers_done_ = (tail_ & 0xffffffffu) == 0x0d0a0d0au || (tail_ & 0xffffu) == 0x0a0au;
    }
    if (headers_done_ && on_headers_) on_headers_();
  }
  int ReadWaitMs() const {
    const auto until = headers_done_ ? deadline_ : std::min(header_deadline_, deadline_);
    const int64_t left = ToMs(until - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, std::min(left, ToMs(kApiIoTimeout))));
  }
  bool Wait(short events, int ms) const {
    if (ms <= 0) return false;
    pollfd p{sock_, events, 0};
    int r;
    do r = ::poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
  }
  void Address(bool peer, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    int r = peer ? ::getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &len)
                 : ::getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len);
    if (r != 0) return;
    char host[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
      port = ntohs(v6->sin6_port);
    }
    ip = host;
  }

  socket_t sock_;
  std::chrono::steady_clock::time_point header_deadline_, deadline_;
  std::function<void()> on_headers_;
  bool headers_done_ = false;
  uint32_t tail_ = 0;
  char buf_[4096];
  size_t pos_ = 0, len_ = 0;
};

// httplib's task queue for the server: a worker thread for every
// connection (a slow client holds its own worker only), made when none is
// idle, up to `max` (the fair-share pools' total and a margin); idle ones
// end after kIdleWorker. At the maximum a connection waits for a worker,
// and `saturated` runs (it cuts the oldest unauthenticated connection).
class WorkerPerConnection : public httplib::TaskQueue {
 public:
  WorkerPerConnection(size_t max, std::function<void()> saturated)
      : max_(max), saturated_(std::move(saturated)) {}
  void enqueue(std::function<void()> fn) override {
    bool full = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Reap();
      jobs_.push_back(std::move(fn));
      if (idle_ >= jobs_.size()) {
        cv_.notify_one();
      } else if (threads_.size() < max_) {
        auto it = threads_.emplace(threads_.end());
        *it = std::thread([this, it] { Work(it); });
      } else {
        full = true;
      }
    }
    if (full && saturated_) saturated_();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    std::lock_guard<std::mutex> lock(mu_);
    Reap();
  }

 private:
  using Handle = std::list<std::thread>::iterator;
  void Work(Handle self) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      const bool woke = cv_.wait_for(lock, kIdleWorker, [&] { return !jobs_.empty() || stop_; });
      --idle_;
      if (jobs_.empty()) {
        if (stop_) return;  // joined by shutdown()
        if (!woke) {
          // Idle too long: hand our handle to the next Reap() and end.
          finished_.splice(finished_.end(), threads_, self);
          return;
        }
        continue;
      }
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  // Joins the workers that ended idle (they hold no lock any more).
  void Reap() {
    for (auto& t : finished_) t.join();
    finished_.clear();
  }

  const size_t max_;
  const std::function<void()> saturated_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::function<void()>> jobs_;
  std::list<std::thread> threads_, finished_;
  size_t idle_ = 0;
  bool stop_ = false;
};

}  // namespace

// httplib's Server with the limits a listener open to anyone needs
// (docs/http_api.md, "Limits"): a worker per connection, the connection
// counted in the fair-share pools from accept to close (charged to its
// token by Authorize), deadlines on reading the request, one request per
// connection.
class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const FairShareLimits& limits) : budget_(limits) {
    const size_t max = static_cast<size_t>(std::max(1, limits.total())) + 16;
    new_task_queue = [this, max] { return new WorkerPerConnection(max, [this] { budget_.EvictOldest(); }); };
    set_write_timeout(kApiIoTimeout.count(), 0);
    set_socket_options([this](socket_t sock) {
      httplib::default_socket_options(sock);
      listen_sock_ = sock;
    });
  }
  ConnectionBudget& budget() { return budget_; }
  // After bind: a listen backlog that a burst of connections does not
  // overflow (httplib's is 5: past it the kernel drops handshakes, and a
  // client, an approver's included, waits a second or more for a retry).
  void WidenBacklog() {
    if (listen_sock_ != INVALID_SOCKET) ::listen(listen_sock_, kListenBacklog);
  }

 private:
  // Overrides httplib's (private virtual): the same, with DeadlineStream
  // and the connection's place in the budget.
  bool process_and_close_socket(socket_t sock) override {
    struct Closer {
      socket_t s;
      ~Closer() {
        ::shutdown(s, SHUT_RDWR);
        ::close(s);
      }
    } closer{sock};
    // Leaves the budget before the socket is closed (its number is then free).
    struct Leave {
      ConnectionBudget& b;
      uint64_t id;
      ~Leave() {
        tl_conn = {};
        b.Leave(id);
      }
    } leave{budget_, budget_.Enter(sock)};
    tl_conn = {&budget_, leave.id, sock};
    const auto now = std::chrono::steady_clock::now();
    DeadlineStream strm(sock, now + budget_.limits().header_deadline, now + kApiReadDeadline,
                        [this, id = leave.id] { budget_.HeadersDone(id); });
    bool closed = false;
    return process_request(strm, /*close_connection=*/true, closed, nullptr);
  }

  ConnectionBudget budget_;
  socket_t listen_sock_ = INVALID_SOCKET;
};

void Reply(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n", "application/json");
}

void Error(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  if (status == 401) res.set_header("WWW-Authenticate", "Bearer");
  Reply(res, status, {{"error", {{"code", code}, {"message", message}}}});
}

// The request body as a JSON object, parsed under the limits of untrusted
// input (depth, number range); false once a 400 with the reason's code is
// set.
bool ReadBody(const httplib::Request& req, httplib::Response& res, Json* body) {
  Status s = ParseInputJson(req.body, body);
  if (!s.ok()) {
    Error(res, 400, s.code(), "the body must be a JSON object: " + s.message());
    return false;
  }
  if (!body->is_object()) {
    Error(res, 400, errc::kInvalidJson, "the body must be a JSON object");
    return false;
  }
  return true;
}

int StatusFor(const Status& s) {
  if (s.code() == errc::kForbidden) return 403;
  if (s.code() == errc::kInvalidQuery || s.code() == errc::kSchemaViolation ||
      s.code() == errc::kInvalidJson || s.code() == errc::kPolicyInvalid) {
    return 400;
  }
  if (s.code() == errc::kNotFound) return 404;
  return 500;
}

namespace {

// Whom a connection with this token is charged to: staff (any role beyond
// agent) or the agent its token is bound to; the token by its digest.
ConnectionOwner OwnerOf(const Principal& who, const std::string& authorization) {
  ConnectionOwner owner;
  owner.token_key = Sha256Hex(authorization);
  owner.org = who.org_id;
  owner.agent = who.identity;
  for (const char* r : {"approver", "auditor", "operator", "admin"}) owner.staff = owner.staff || who.Has(r);
  return owner;
}

}  // namespace

OAuthResource ResourceOf(const httplib::Request& req) {
  return req.path == "/mcp" ? OAuthResource::kMcp : OAuthResource::kApi;
}

bool Authenticate(const ApiOptions& o, const std::string& authorization, OAuthResource resource,
                  Principal* who, OAuthRefusal* why) {
  if (BearerPrincipal(o.credentials, o.tokens, authorization, who)) return true;
  const std::string prefix = "Bearer ";
  // A static token is hex; only a JWT (with its dots) is worth verifying.
  if (!o.oauth || authorization.compare(0, prefix.size(), prefix) != 0 ||
      authorization.find('.') == std::string::npos) {
    *why = {TokenFault::kNone, "unknown or revoked token"};
    return false;
  }
  return o.oauth->Authenticate(authorization.substr(prefix.size()), resource, who, why);
}

namespace {

// 401 with tollgate's JSON error; with --oauth, the challenge that leads a
// client to the metadata and its authorization server (RFC 9728 5.1)
// replaces the bare "Bearer" (one WWW-Authenticate: the SDK reads the first).
void Unauthorized(const ApiOptions& o, const httplib::Request& req, httplib::Response& res, bool token_given,
                  const std::string& message) {
  Error(res, 401, "E_UNAUTHORIZED", message);
  if (!o.oauth) return;
  res.headers.erase("WWW-Authenticate");
  res.set_header("WWW-Authenticate", o.oauth->Challenge(ResourceOf(req), token_given));
}

}  // namespace

// The caller, or false after answering 401/403 (or 429/503 when the
// connection would exceed its identity's share).
bool Authorize(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
               std::initializer_list<const char*> roles, Principal* who) {
  const std::string h = req.get_header_value("Authorization");
  if (h.empty()) {
    Unauthorized(o, req, res, false, "missing Authorization: Bearer <token>");
    return false;
  }
  OAuthRefusal why;
  if (!Authenticate(o, h, ResourceOf(req), who, &why)) {
    Unauthorized(o, req, res, true, why.message);
    return false;
  }
  // From here the connection counts against the token (api/fair_share.h).
  if (tl_conn.budget != nullptr) {
    Refusal why;
    if (!tl_conn.budget->Charge(tl_conn.id, OwnerOf(*who, h), &why)) {
      res.set_header("Retry-After", "1");
      Error(res, why.status, why.code, why.message);
      return false;
    }
  }
  for (const char* r : roles) {
    if (who->Has(r)) return true;
  }
  std::string need;
  for (const char* r : roles) need += std::string(need.empty() ? "" : " or ") + r;
  Error(res, 403, errc::kForbidden, "'" + who->identity + "' lacks the role " + need);
  return false;
}

std::string Param(const httplib::Request& req, const char* key) {
  return req.has_param(key) ? req.get_param_value(key) : "";
}

// The org= a caller may read: a caller bound to one org reads that org
// (naming another is 403); an admin, or a token for every org ("*"), reads
// the org it names, or every org ("").
bool ScopedOrg(const httplib::Request& req, httplib::Response& res, const Principal& who, std::string* org) {
  *org = Param(req, "org");
  if (who.org_id == "*") return true;
  if (!org->empty() && *org != who.org_id) {
    Error(res, 403, errc::kForbidden, "'" + who.identity + "' may not read org '" + *org + "'");
    return false;
  }
  *org = who.org_id;
  return true;
}

const ConnectionBudget& BudgetOf(const Impl* im) { return im->server->budget(); }

int CurrentSocket() { return tl_conn.sock; }

namespace {

// The web console (api/console.h), and the headers every response carries.
void RegisterConsoleRoutes(Impl*, httplib::Server& svr) {
  ServeConsole(svr);
  // On every response: nothing of ours is sniffed as another type, framed,
  // or given a referrer; API answers may run no script at all.
  svr.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("X-Frame-Options", "DENY");
    if (!res.has_header("Content-Security-Policy")) {
      res.set_header("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
    }
    if (req.path.rfind("/v1/", 0) == 0) res.set_header("Cache-Control", "no-store");
  });
}

// Errors httplib answers itself (404 for an unknown path, 413) get the same
// JSON shape as ours.
void HandleHttpError(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  if (req.path == "/mcp" && res.status == 413) {
    return Reply(res, 413,
                 mcp::Error(nullptr, mcp::kInvalidRequest,
                            "the body is over " + std::to_string(kMaxApiBodyBytes) + " bytes"));
  }
  if (res.status == 413)
    return Error(res, 413, "E_BODY_TOO_LARGE",
                 "the body is over " + std::to_string(kMaxApiBodyBytes) + " bytes");
  if (res.status == 404) return Error(res, 404, errc::kNotFound, "no such endpoint");
  Error(res, res.status, "E_HTTP", "HTTP " + std::to_string(res.status));
}

// A handler that throws (a body field of an unexpected type reaching a
// typed accessor) answers 400 instead of ending the process.
void HandleException(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
  std::string what = "unexpected input";
  try {
    if (ep) std::rethrow_exception(ep);
  } catch (const Json::exception& e) {
    Json body;  // to name the field (core/json_error.h)
    const bool parsed = ParseInputJson(req.body, &body, kMaxApiBodyBytes).ok();
    return Error(res, 400, errc::kInvalidJson,
                 "the body does not fit this call: " + JsonErrorText(e, parsed ? &body : nullptr));
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  Error(res, 500, errc::kInternal, what);
}

// Bodies are small JSON documents and policies; anything larger is
// refused before it is read.
void ConfigureErrors(httplib::Server& svr) {
  svr.set_payload_max_length(kMaxApiBodyBytes);
  svr.set_error_handler(HandleHttpError);
  svr.set_exception_handler(HandleException);
}

// Binds o.host:o.port (any free port when 0); the port bound, or 0 with
// the reason in *s.
int BindPort(GuardedServer& svr, const ApiOptions& o, Status* s) {
  if (o.port == 0) {
    const int port = svr.bind_to_any_port(o.host);
    if (port <= 0) *s = Status::Error(errc::kLogIO, "cannot listen on " + o.host);
    return port;
  }
  if (!svr.bind_to_port(o.host, o.port)) {
    *s = Status::Error(errc::kLogIO, "cannot listen on " + o.host + ":" + std::to_string(o.port));
    return 0;
  }
  return o.port;
}

}  // namespace
}  // namespace http_api

struct ApiServer::Impl : http_api::Impl {};

Status ApiServer::Start(ApiOptions options, const LogStore& store, std::unique_ptr<ApiServer>* out) {
  using namespace http_api;
  std::unique_ptr<ApiServer> api(new ApiServer());
  api->impl_ = std::make_unique<Impl>();
  Impl* im = api->impl_.get();
  im->options = std::move(options);
  im->store = &store;
  im->server = std::make_unique<GuardedServer>(im->options.limits);
  Status s = Producer::Open(im->options.bus, "", &im->producer);
  if (!s.ok()) return s;
  httplib::Server& svr = *im->server;

  // In this order: httplib takes the first route that matches.
  RegisterHealthRoutes(im, svr);
  RegisterOAuthRoutes(im, svr);
  RegisterApprovalRoutes(im, svr);
  RegisterCredentialRoutes(im, svr);
  RegisterAuditRoutes(im, svr);
  RegisterProofRoutes(im, svr);
  RegisterReportRoutes(im, svr);
  RegisterIdentityRoutes(im, svr);
  RegisterConsoleRoutes(im, svr);
  RegisterReplayRoutes(im, svr);
  RegisterToolRoutes(im, svr);
  ConfigureErrors(svr);

  api->port_ = BindPort(*im->server, im->options, &s);
  if (!s.ok()) return s;
  // The resources are named after the bound address, never a request's
  // Host header (which a client chooses); before the listener starts.
  if (im->options.oauth) im->options.oauth->SetDefaultResourceBase(api->url());
  im->server->WidenBacklog();
  im->thread = std::thread([im] { im->server->listen_after_bind(); });
  *out = std::move(api);
  return Status::Ok();
}

ApiServer::~ApiServer() {
  if (!impl_) return;
  // Streams (MCP calls waiting for approvals) end first, or a worker would
  // hold the pool's join.
  if (impl_->options.mcp) impl_->options.mcp->Shutdown();
  // stop() only acts on a running server: let the listener thread get there.
  for (int i = 0; i < 200 && impl_->thread.joinable() && !impl_->server->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string ApiServer::url() const { return "http://" + impl_->options.host + ":" + std::to_string(port_); }

}  // namespace tollgate
