#include "api/http_api.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <list>
#include <optional>
#include <sstream>
#include <thread>

#include "api/approval_response.h"
#include "api/console.h"
#include "api/metrics.h"
#include "audit/agent_rules.h"
#include "audit/approvals.h"
#include "audit/audit_query.h"
#include "audit/export.h"
#include "audit/log_sink.h"
#include "audit/query_params.h"
#include "core/auth.h"
#include "core/json_error.h"
#include "core/messages.h"
#include "core/schema.h"
#include "core/sha256.h"
#include "core/tool_discovery.h"
#include "replay/from_log.h"

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

// Whether the client on `sock` has hung up (or reset): what an event
// stream checks between its writes, so a tools/call whose client left is
// noticed in well under a second even when nothing is being sent.
bool PeerGone(int sock) {
  if (sock < 0) return false;
  pollfd p{sock, static_cast<short>(POLLIN | POLLRDHUP), 0};
  int r;
  do r = ::poll(&p, 1, 0);
  while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char c;
  return ::recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

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

}  // namespace

struct ApiServer::Impl {
  ApiOptions options;
  const LogStore* store = nullptr;
  std::atomic<int> replays{0};  // replay requests being computed
  std::unique_ptr<Producer> producer;
  std::mutex producer_mu;
  std::unique_ptr<GuardedServer> server;
  std::thread thread;
};

namespace {

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

// The caller, or false after answering 401/403 (or 429/503 when the
// connection would exceed its identity's share).
bool Authorize(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
               std::initializer_list<const char*> roles, Principal* who) {
  const std::string h = req.get_header_value("Authorization");
  if (h.empty()) {
    Error(res, 401, "E_UNAUTHORIZED", "missing Authorization: Bearer <token>");
    return false;
  }
  if (!BearerPrincipal(o.credentials, o.tokens, h, who)) {
    Error(res, 401, "E_UNAUTHORIZED", "unknown or revoked token");
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

// The since= and until= parameters (RFC 3339), when given; false after
// answering 400.
bool TimeRange(const httplib::Request& req, httplib::Response& res, std::optional<int64_t>* since_us,
               std::optional<int64_t>* until_us) {
  for (const char* k : {"since", "until"}) {
    const std::string v = Param(req, k);
    if (v.empty()) continue;
    int64_t us;
    if (!ParseTime(v, &us)) {
      Error(res, 400, errc::kInvalidQuery, std::string(k) + ": not an RFC 3339 time");
      return false;
    }
    *(std::string(k) == "since" ? since_us : until_us) = us;
  }
  return true;
}

// The get_audit_log query of /v1/audit's parameters, scoped to the caller
// (a caller bound to one org reads that org); false after answering.
bool AuditQueryOf(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
                  std::initializer_list<const char*> roles, AuditQuery* q, QueryScope* scope) {
  Principal who;
  if (!Authorize(o, req, res, roles, &who)) return false;
  Status st = AuditQueryFromParams(AuditParamsFromQueryString(req.params), q);
  if (!st.ok()) {
    Error(res, 400, st.code(), st.message());
    return false;
  }
  *scope = QueryScope::Operator();
  if (who.org_id != "*") {
    *scope = QueryScope::Tenant(who.org_id);
    if (q->org_id.empty()) q->org_id = who.org_id;
  }
  // An agent's token is bound to (org, agent): its own entries only, as
  // the get_audit_log tool gives it.
  if (!who.Has("auditor") && !who.admin()) {
    if (who.org_id == "*" || (!q->agent_id.empty() && q->agent_id != who.identity)) {
      Error(res, 403, errc::kForbidden, "an agent's token reads its own entries only");
      return false;
    }
    q->agent_id = who.identity;
  }
  return true;
}

// The replay target of a request by an auditor or admin: the session in the
// path (/sessions/{id}/...), or agent= with since= and until=; of the
// caller's org (ScopedOrg). False after answering 401/403/400.
bool ReplayTargetOf(const ApiOptions& o, const httplib::Request& req, httplib::Response& res,
                    replay::Target* t) {
  Principal who;
  if (!Authorize(o, req, res, {"auditor", "admin"}, &who)) return false;
  if (req.matches.size() > 1) {
    t->session_id = req.matches[1];
    return ScopedOrg(req, res, who, &t->org_id);
  }
  t->agent_id = Param(req, "agent");
  if (t->agent_id.empty()) {
    Error(res, 400, errc::kInvalidQuery, "agent= is required (or replay one session)");
    return false;
  }
  return ScopedOrg(req, res, who, &t->org_id) && TimeRange(req, res, &t->since_us, &t->until_us);
}

// GET /v1/approvals's paging (docs/http_api.md): limit= (default 50, at
// most 500), cursor= (a page's next_cursor: the requested_seq of its last
// approval), desc=1 (newest first).
struct ApprovalPaging {
  size_t limit = 50;
  uint64_t cursor = 0;  // 0: from the first
  bool desc = false;
};
constexpr size_t kMaxApprovalsPage = 500;
constexpr size_t kApprovalsPageBytes = 1 << 20;

// False after answering 400 E_INVALID_QUERY.
bool ApprovalPagingOf(const httplib::Request& req, httplib::Response& res, ApprovalPaging* p) {
  auto number = [](const std::string& v, uint64_t* out) {
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoull(v);
    return true;
  };
  uint64_t n = 0;
  if (const std::string v = Param(req, "limit"); !v.empty()) {
    if (!number(v, &n) || n == 0 || n > kMaxApprovalsPage) {
      Error(res, 400, errc::kInvalidQuery, "limit: a number from 1 to " + std::to_string(kMaxApprovalsPage));
      return false;
    }
    p->limit = n;
  }
  if (const std::string v = Param(req, "cursor"); !v.empty()) {
    if (!number(v, &p->cursor)) {
      Error(res, 400, errc::kInvalidQuery, "cursor: pass back a next_cursor this endpoint gave");
      return false;
    }
  }
  const std::string desc = Param(req, "desc");
  if (!desc.empty() && desc != "0" && desc != "1" && desc != "true" && desc != "false") {
    Error(res, 400, errc::kInvalidQuery, "desc: 1 or 0");
    return false;
  }
  p->desc = desc == "1" || desc == "true";
  return true;
}

// Holds one of the server's max_concurrent_replays slots while a replay is
// computed (each reads the log on a thread of its own and holds a worker
// thread), so replays cannot starve approvals; ok() false after answering
// 503.
class ReplaySlot {
 public:
  ReplaySlot(std::atomic<int>& running, int max, httplib::Response& res) : running_(running) {
    ok_ = running_.fetch_add(1) < max;
    if (!ok_) Error(res, 503, "E_BUSY", "as many replays as allowed are running; retry shortly");
  }
  ~ReplaySlot() { running_.fetch_sub(1); }
  bool ok() const { return ok_; }

 private:
  std::atomic<int>& running_;
  bool ok_;
};

// The candidate policy of a what-if: the request body, YAML (or JSON).
bool CandidatePolicy(const httplib::Request& req, httplib::Response& res, PolicyPtr* out) {
  if (req.body.empty()) {
    Error(res, 400, errc::kPolicyInvalid, "the body must be the candidate policy (YAML or JSON)");
    return false;
  }
  Status st = replay::ParseCandidate(req.body, "http:what-if", out);
  if (!st.ok()) {
    Error(res, 400, st.code(), st.message());
    return false;
  }
  return true;
}

}  // namespace

Status ApiServer::Start(ApiOptions options, const LogStore& store, std::unique_ptr<ApiServer>* out) {
  std::unique_ptr<ApiServer> api(new ApiServer());
  api->impl_ = std::make_unique<Impl>();
  Impl* im = api->impl_.get();
  im->options = std::move(options);
  im->store = &store;
  im->server = std::make_unique<GuardedServer>(im->options.limits);
  Status s = Producer::Open(im->options.bus, "", &im->producer);
  if (!s.ok()) return s;
  const ApiOptions& o = im->options;
  httplib::Server& svr = *im->server;

  svr.Get("/healthz", [im](const httplib::Request&, httplib::Response& res) {
    uint64_t seq = 0;
    Digest hash;
    Status st = im->store->ReadHead(&seq, &hash);
    Json body{{"ok", st.ok()}, {"head_seq", seq}};
    if (im->options.degraded) {
      if (std::vector<std::string> why = im->options.degraded(); !why.empty()) body["degraded"] = why;
    }
    if (im->options.policy_health) body["policy"] = im->options.policy_health();
    if (Status r = im->options.log_refusal ? im->options.log_refusal() : Status::Ok(); !r.ok()) {
      body["ok"] = false;  // no call can be taken
      body["log_refusing"] = {{"code", r.code()}, {"message", r.message()}};
      st = r;
    }
    Reply(res, st.ok() ? 200 : 503, body);
  });

  // The gate's public keys (core/result_signature.h): public, so any
  // agent can check the results it reads. The newest first.
  svr.Get("/v1/gate-key", [&o](const httplib::Request&, httplib::Response& res) {
    std::vector<Credential> keys =
        o.credentials ? o.credentials->List("gate_key") : std::vector<Credential>{};
    keys.erase(std::remove_if(keys.begin(), keys.end(), [](const Credential& c) { return c.revoked; }),
               keys.end());
    if (keys.empty()) return Error(res, 404, errc::kNotFound, "this deployment registered no gate key");
    std::sort(keys.begin(), keys.end(),
              [](const Credential& a, const Credential& b) { return a.added_us > b.added_us; });
    Json all = Json::array();
    for (const Credential& c : keys)
      all.push_back({{"key_id", c.key_id}, {"public_key", c.public_key}, {"alg", "EdDSA"}});
    Json body = all[0];
    body["keys"] = all;
    Reply(res, 200, body);
  });

  svr.Get("/metrics", [&o](const httplib::Request& req, httplib::Response& res) {
    if (!o.metrics) return Error(res, 404, errc::kNotFound, "metrics are not served here");
    Principal who;
    if (!o.metrics_public && !Authorize(o, req, res, {"operator", "admin"}, &who)) return;
    // An org's operator or admin sees its org's series only (api/metrics.h).
    res.set_content(o.metrics_public ? o.metrics() : MetricsVisibleTo(who.org_id, o.metrics()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });

  svr.Get("/v1/approvals", [im, &o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"approver", "admin"}, &who)) return;
    PendingFilter f{"", Param(req, "agent")};
    if (!ScopedOrg(req, res, who, &f.org_id)) return;
    ApprovalPaging page;
    if (!ApprovalPagingOf(req, res, &page)) return;
    std::vector<PendingApproval> pending;
    Status st = ListPendingApprovals(*im->store, f, &pending);
    if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
    // In the order approvals were requested (a seq names each), from the
    // cursor on: a page is at most `limit` of them and about
    // kApprovalsPageBytes (an approval carries its request's arguments).
    std::stable_sort(pending.begin(), pending.end(), [&](const PendingApproval& a, const PendingApproval& b) {
      return page.desc ? a.requested_seq > b.requested_seq : a.requested_seq < b.requested_seq;
    });
    Json list = Json::array();
    size_t bytes = 0;
    std::string next;
    for (const auto& p : pending) {
      if (page.cursor != 0 && (page.desc ? p.requested_seq >= page.cursor : p.requested_seq <= page.cursor))
        continue;
      if (list.size() >= page.limit || (!list.empty() && bytes >= kApprovalsPageBytes)) {
        next = std::to_string(list.back()["requested_seq"].get<uint64_t>());
        break;
      }
      Json j = p.ToJson();
      const bool listed = p.approvers.empty() || std::find(p.approvers.begin(), p.approvers.end(),
                                                           who.identity) != p.approvers.end();
      j["you_may_approve"] =
          listed && std::find(p.granted_by.begin(), p.granted_by.end(), who.identity) == p.granted_by.end();
      bytes += j.dump(-1, ' ', false, Json::error_handler_t::replace).size();
      list.push_back(std::move(j));
    }
    Reply(res, 200, {{"approvals", list}, {"next_cursor", next}, {"total", pending.size()}});
  });

  // The "allow always" rules in force, and their revocation (audit/agent_rules.h).
  svr.Get("/v1/rules", [im, &o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"approver", "auditor", "admin"}, &who)) return;
    std::string org;
    if (!ScopedOrg(req, res, who, &org)) return;
    std::vector<AgentRule> rules;
    Status st = ListAgentRules(*im->store, org, Param(req, "agent"), &rules);
    if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
    Json list = Json::array();
    for (const auto& r : rules) list.push_back(r.ToJson());
    Reply(res, 200, {{"rules", list}});
  });

  svr.Post("/v1/rules/revoke", [im, &o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"admin"}, &who)) return;
    Json body;
    if (!ReadBody(req, res, &body)) return;
    if (o.sink == nullptr) return Error(res, 503, errc::kInternal, "this server cannot append to the log");
    const std::string agent = body.value("agent_id", ""), pattern = body.value("pattern", "");
    std::string org = who.org_id == "*" ? body.value("org_id", "") : who.org_id;
    if (agent.empty() || pattern.empty() || org.empty() || org == "*") {
      return Error(res, 400, errc::kInvalidQuery,
                   "give agent_id, pattern (and org_id with a deployment-wide token)");
    }
    if (who.org_id != "*" && body.contains("org_id") && body["org_id"] != who.org_id) {
      return Error(res, 403, errc::kForbidden,
                   "'" + who.identity + "' may not change org '" + body.value("org_id", "") + "'");
    }
    std::vector<AgentRule> rules;
    Status st = ListAgentRules(*im->store, org, agent, &rules);
    if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
    if (std::none_of(rules.begin(), rules.end(), [&](const AgentRule& r) { return r.pattern == pattern; })) {
      return Error(res, 404, errc::kNotFound,
                   "agent '" + agent + "' of org '" + org + "' has no rule '" + pattern + "'");
    }
    uint64_t seq = 0;
    if (!AppendOne(*o.sink,
                   AgentRulesRevokedEvent(org, agent, {pattern}, who.identity, body.value("comment", ""),
                                          NowMicros()),
                   &seq)
             .ok()) {
      return Error(res, 503, errc::kInternal, "the log did not take the revocation");
    }
    Reply(res, 200, {{"revoked", pattern}, {"org_id", org}, {"agent_id", agent}, {"seq", seq}});
  });

  svr.Post(R"(/v1/approvals/([^/]+))", [im, &o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"approver", "admin"}, &who)) return;
    const std::string rid = req.matches[1];
    Json body;
    if (!ReadBody(req, res, &body)) return;
    if (!o.service_signer)
      return Error(res, 503, errc::kInternal, "this server cannot sign approval responses");
    // request_ids are per org: the caller's, or the one a deployment-wide
    // admin names.
    std::string org = who.org_id;
    if (org == "*") org = Param(req, "org").empty() ? body.value("org_id", "") : Param(req, "org");
    if (org.empty() || org == "*") {
      return Error(res, 400, errc::kInvalidQuery,
                   "a deployment-wide caller must name the request's org (org=)");
    }
    StoreLogView view(*im->store);
    std::vector<Event> events;
    Status st = view.EventsOfRequest(org, rid, &events);
    if (!st.ok()) return Error(res, 500, st.code(), st.message());
    RequestState state = Summarize(events);
    // Another org's request is as invisible as one that does not exist.
    if (state.approval_requested == nullptr || !who.InOrg(state.approval_requested->org_id)) {
      return Error(res, 404, errc::kNotFound, "no approval requested for '" + rid + "'");
    }
    Json resp;
    st = ApprovalResponseFrom(body, rid, org, who.identity,
                              state.approval_requested->data.value("args_hash", Json("")), &resp);
    if (!st.ok()) return Error(res, 400, st.code(), st.message());
    const Json request = state.received ? state.received->data.value("request", Json::object())
                                        : Json{{"request_id", rid},
                                               {"agent_id", state.approval_requested->agent_id},
                                               {"session_id", state.approval_requested->session_id}};
    {
      std::lock_guard<std::mutex> lock(im->producer_mu);
      st = PublishApprovalResponse(*im->producer, o.bus.topics, request, resp, *o.service_signer, who.org_id);
    }
    if (!st.ok()) return Error(res, 503, st.code(), "could not publish the response: " + st.message());
    // Wait for the stage's verdict on this response in the log.
    const std::string response_id = resp["response_id"];
    auto deadline = std::chrono::steady_clock::now() + o.outcome_wait;
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!view.EventsOfRequest(org, rid, &events).ok()) break;
      for (const Event& e : events) {
        if (e.data.value("response_id", "") != response_id) continue;
        RequestState now = Summarize(events);
        Json out{{"request_id", rid},
                 {"response_id", response_id},
                 {"event", e.RecordJson()},
                 {"approval_pending", now.approval_pending()},
                 {"settled", now.approval_settled ? now.approval_settled->type : ""}};
        if (e.type == ev::kApprovalRefused) {
          out["outcome"] = "refused";
          out["error"] = {{"code", e.data.value("code", "")}, {"message", e.data.value("message", "")}};
          return Reply(res, 409, out);
        }
        out["outcome"] = e.type == ev::kApprovalGranted ? "granted" : "denied";
        return Reply(res, 200, out);
      }
    } while (std::chrono::steady_clock::now() < deadline);
    Reply(res, 202, {{"request_id", rid}, {"response_id", response_id}, {"outcome", "submitted"}});
  });

  // Credentials (docs/trust.md): an org's admin manages its own org's, a
  // deployment-wide admin every org's and the deployment's. Each change is
  // an event appended to the log; the registry (a fold of those events)
  // applies it at once.
  svr.Get("/v1/credentials", [&o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"admin"}, &who)) return;
    std::string org;
    if (!ScopedOrg(req, res, who, &org)) return;
    if (o.credentials == nullptr) return Error(res, 503, errc::kInternal, "no credential registry");
    Json list = Json::array();
    for (const Credential& c : o.credentials->List(Param(req, "kind"), org)) list.push_back(c.ToJson());
    Reply(res, 200, {{"credentials", list}});
  });

  svr.Post("/v1/credentials", [&o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"admin"}, &who)) return;
    if (o.credentials == nullptr || o.sink == nullptr)
      return Error(res, 503, errc::kInternal, "no credential registry");
    Json body;
    if (!ReadBody(req, res, &body)) return;
    // The caller's own org unless it names one (a deployment admin must).
    if (!body.contains("org_id") && who.org_id != "*") body["org_id"] = who.org_id;
    if (const Json org = body.value("org_id", Json()); org.is_string()) {
      const std::string o_id = org.get<std::string>();
      if (!who.InOrg(o_id) || (o_id == "*" && who.org_id != "*")) {
        return Error(res, 403, errc::kForbidden,
                     "'" + who.identity + "' may not add credentials to org '" + o_id + "'");
      }
    }
    const std::string token = body.value("kind", Json("")) == "token" ? NewToken() : "";
    Credential c;
    Status st = NewCredential(body, who.identity, token, *o.credentials, &c);
    if (!st.ok()) return Error(res, st.code() == errc::kConflict ? 409 : 400, st.code(), st.message());
    const Event e = CredentialAddedEvent(c, c.added_us);
    uint64_t seq = 0;
    if (!AppendOne(*o.sink, e, &seq).ok())
      return Error(res, 503, errc::kInternal, "the log did not take the change");
    Json out{{"credential", c.ToJson()}, {"log_seq", seq}};
    if (!token.empty()) out["token"] = token;  // shown once, kept nowhere
    Reply(res, 201, out);
  });

  svr.Delete(R"(/v1/credentials/([0-9a-f]{16}))", [&o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"admin"}, &who)) return;
    if (o.credentials == nullptr || o.sink == nullptr)
      return Error(res, 503, errc::kInternal, "no credential registry");
    Credential c;
    // Another org's credential is as invisible as one that does not exist.
    if (!o.credentials->Find(req.matches[1], &c) || !who.InOrg(c.org_id)) {
      return Error(res, 404, errc::kNotFound, "no credential " + std::string(req.matches[1]));
    }
    if (c.org_id == "*" && who.org_id != "*")
      return Error(res, 403, errc::kForbidden, "deployment credential");
    uint64_t seq = 0;
    if (!AppendOne(*o.sink, CredentialRevokedEvent(c, who.identity, Param(req, "reason"), NowMicros()), &seq)
             .ok()) {
      return Error(res, 503, errc::kInternal, "the log did not take the change");
    }
    o.credentials->Find(c.key_id, &c);
    Reply(res, 200, {{"credential", c.ToJson()}, {"log_seq", seq}});
  });

  svr.Get("/v1/audit", [im, &o](const httplib::Request& req, httplib::Response& res) {
    AuditQuery q;
    QueryScope scope;
    if (!AuditQueryOf(o, req, res, {"auditor", "admin", "agent"}, &q, &scope)) return;
    q.json_lines = true;
    AuditPage page;
    Status st = GetAuditLog(*im->store, scope, q, &page);
    if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
    std::string text = "{\"events\":[";
    for (size_t i = 0; i < page.lines.size(); ++i) {
      if (i) text += ',';
      text += page.lines[i];
    }
    text += "],\"next_cursor\":" + Json(page.next_cursor).dump() + "}\n";
    res.status = 200;
    res.set_content(text, "application/json");
  });

  // The records of a filter as a selection export (audit/export.h), which
  // `tollgate audit verify --file` checks: what the console's Export gives.
  svr.Get("/v1/audit/export", [im, &o](const httplib::Request& req, httplib::Response& res) {
    AuditQuery q;
    QueryScope scope;
    if (!AuditQueryOf(o, req, res, {"auditor", "admin"}, &q, &scope)) return;
    std::ostringstream out;
    Status st = ExportSelection(*im->store, scope, q, out);
    if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
    res.status = 200;
    res.set_header("Content-Disposition", "attachment; filename=\"tollgate-audit.jsonl\"");
    res.set_content(out.str(), "application/x-ndjson");
  });

  // Who the token is: the console's login asks this.
  svr.Get("/v1/whoami", [&o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"agent", "approver", "auditor", "operator", "admin"}, &who)) return;
    Reply(res, 200, {{"identity", who.identity}, {"org_id", who.org_id}, {"roles", who.roles}});
  });

  // What the fair-share pools hold (api/fair_share.h): deployment-wide
  // figures, so an operator or a deployment admin only.
  svr.Get("/v1/connections", [im, &o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"operator", "admin"}, &who)) return;
    if (who.org_id != "*")
      return Error(res, 403, errc::kForbidden, "deployment-wide figures: a token of org '*' only");
    const ConnectionBudget& b = im->server->budget();
    const ConnectionBudget::Usage u = b.usage();
    Json out{
        {"connections", {{"unauthenticated", u.unauthenticated}, {"agent", u.agent}, {"staff", u.staff}}},
        {"refused", {{"identity_cap", u.refused_identity}, {"busy", u.refused_busy}, {"evicted", u.evicted}}},
        {"limits", b.limits().ToJson()}};
    if (o.mcp) out["mcp"] = o.mcp->Stats();
    if (const std::string org = Param(req, "org"); !org.empty()) {
      out["org"] = {{"org_id", org}, {"agent_connections", b.org_connections(org)}};
      if (const std::string agent = Param(req, "agent"); !agent.empty()) {
        out["org"]["agent_id"] = agent;
        out["org"]["connections_of_agent"] = b.agent_connections(org, agent);
      }
    }
    Reply(res, 200, out);
  });

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

  // Replay (replay/from_log.h, as `tollgate replay` runs it): auditor,
  // admin. A session or agent with no event in the caller's org is 404.
  // Each endpoint takes the request's target (ReplayTargetOf) and one of
  // the replay slots, then runs.
  const auto replay_endpoint = [im](auto run) {
    return [im, run](const httplib::Request& req, httplib::Response& res) {
      replay::Target t;
      if (!ReplayTargetOf(im->options, req, res, &t)) return;
      ReplaySlot slot(im->replays, im->options.max_concurrent_replays, res);
      if (!slot.ok()) return;
      run(t, req, res);
    };
  };
  svr.Get(R"(/v1/replay/sessions/([^/]+))",
          replay_endpoint([im](const replay::Target& t, const httplib::Request&, httplib::Response& res) {
            replay::SessionTimeline timeline;
            Status st = replay::ReadTimeline(*im->store, t, &timeline);
            if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
            Reply(res, 200, {{"timeline", replay::TimelineToJson(timeline)}});
          }));
  svr.Get(R"(/v1/replay/sessions/([^/]+)/verify)",
          replay_endpoint([im](const replay::Target& t, const httplib::Request&, httplib::Response& res) {
            replay::ChainReport chain;
            Status st = replay::CheckTargetChain(*im->store, t, &chain);
            replay::RedecideReport report;
            if (st.ok()) st = replay::RedecideTarget(*im->store, t, {}, &report);
            if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
            Reply(res, 200,
                  {{"clean", chain.ok() && report.clean()},
                   {"chain", chain.ToJson()},
                   {"verify", report.ToJson()}});
          }));
  // One session's what-if, or an agent's sessions' (agent=, since=, until=).
  const auto what_if =
      replay_endpoint([im](const replay::Target& t, const httplib::Request& req, httplib::Response& res) {
        replay::RedecideOptions options;
        if (!CandidatePolicy(req, res, &options.candidate)) return;
        replay::RedecideReport report;
        Status st = replay::RedecideTarget(*im->store, t, options, &report);
        if (!st.ok()) return Error(res, StatusFor(st), st.code(), st.message());
        Reply(res, 200, {{"what_if", report.ToJson()}});
      });
  svr.Post(R"(/v1/replay/sessions/([^/]+)/what-if)", what_if);
  svr.Post("/v1/replay/what-if", what_if);

  svr.Get("/v1/tools", [&o](const httplib::Request& req, httplib::Response& res) {
    Principal who;
    if (!Authorize(o, req, res, {"agent", "auditor", "approver", "admin"}, &who)) return;
    if (!o.list_tools) return Error(res, 503, "E_UNAVAILABLE", "this server lists no tools");
    const bool agent_only = !who.Has("auditor") && !who.Has("approver") && !who.admin();
    std::string org = req.has_param("org") ? req.get_param_value("org") : who.org_id;
    std::string agent =
        req.has_param("agent") ? req.get_param_value("agent") : (agent_only ? who.identity : "");
    if (org == "*" || org.empty()) return Error(res, 400, errc::kInvalidQuery, "name the org (org=)");
    if (agent.empty()) return Error(res, 400, errc::kInvalidQuery, "name the agent (agent=)");
    if (!who.InOrg(org)) return Error(res, 403, errc::kForbidden, "the token is not of org '" + org + "'");
    if (agent_only && agent != who.identity) {
      return Error(res, 403, errc::kForbidden, "an agent token lists its own tools only");
    }
    // Discovery (core/tool_discovery.h): ?category=&safe_only=&keyword=&format=.
    ToolQuery q{req.get_param_value("category"), req.get_param_value("safe_only") == "true",
                req.get_param_value("keyword"), req.get_param_value("format")};
    if (Status c = CheckToolQuery(q); !c.ok()) return Error(res, 400, c.code(), c.message());
    Json out;
    Status s = o.list_tools(org, agent, &out);
    if (!s.ok()) return Error(res, 503, s.code(), s.message());
    out["tools"] = DiscoverTools(out.value("tools", Json::array()), q);
    if (!q.format.empty()) out["format"] = q.format;
    Reply(res, 200, out);
  });

  if (o.mcp) {
    auto serve_mcp = [&o](const httplib::Request& req, httplib::Response& res) {
      Principal who;
      if (!Authorize(o, req, res, {"agent"}, &who)) return;
      if (who.org_id == "*") return Error(res, 403, errc::kForbidden, "an agent token names one org");
      mcp::HttpCall call{
          req.method, req.body,     [&req](const std::string& h) { return req.get_header_value(h.c_str()); },
          who.org_id, who.identity, nullptr};
      // A stream (GET, or a tools/call waiting for its approval) ends once
      // its client hangs up or its token stops authenticating (revoked).
      call.gone = [&o, sock = tl_conn.sock, auth = req.get_header_value("Authorization")] {
        Principal still;
        return PeerGone(sock) || !BearerPrincipal(o.credentials, o.tokens, auth, &still);
      };
      mcp::HttpReply r = o.mcp->Handle(call);
      res.status = r.status;
      for (const auto& [k, v] : r.headers) res.set_header(k.c_str(), v);
      if (!r.stream) {
        if (!r.body.empty()) res.set_content(r.body, r.content_type.c_str());
        return;
      }
      auto stream = std::move(r.stream);
      res.set_chunked_content_provider(r.content_type.c_str(), [stream](size_t, httplib::DataSink& sink) {
        stream([&sink](const std::string& chunk) { return sink.write(chunk.data(), chunk.size()); });
        sink.done();
        return true;
      });
    };
    svr.Post("/mcp", serve_mcp);
    svr.Get("/mcp", serve_mcp);
    svr.Delete("/mcp", serve_mcp);
  }

  // Bodies are small JSON documents and policies; anything larger is
  // refused before it is read. Errors httplib answers itself (404 for an
  // unknown path, 413) get the same JSON shape as ours.
  svr.set_payload_max_length(kMaxApiBodyBytes);
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
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
  });
  // A handler that throws (a body field of an unexpected type reaching a
  // typed accessor) answers 400 instead of ending the process.
  svr.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
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
  });

  if (o.port == 0) {
    api->port_ = svr.bind_to_any_port(o.host);
    if (api->port_ <= 0) return Status::Error(errc::kLogIO, "cannot listen on " + o.host);
  } else {
    if (!svr.bind_to_port(o.host, o.port)) {
      return Status::Error(errc::kLogIO, "cannot listen on " + o.host + ":" + std::to_string(o.port));
    }
    api->port_ = o.port;
  }
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
