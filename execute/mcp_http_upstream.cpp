// An upstream MCP server over Streamable HTTP (execute/mcp_upstream.h):
// each message is one POST, answered as JSON or as an SSE stream holding
// the response. The supervisor thread connects, re-lists every minute, and
// reconnects with backoff when the server is unreachable.
// Connecting probes the era (mcp_upstream_internal.h) with server/discover
// and its three headers. 2026-07-28: no initialize and no session; every
// POST carries the envelope and MCP-Protocol-Version, Mcp-Method and
// Mcp-Name. Legacy, which a 4xx other than 401/403 means unless its body is
// a -32022 naming 2026-07-28 (v1 SDK servers answer 400 -32000, refusing
// the header or the sessionless request): initialize, whose session id
// rides on every later POST. A probe answered 401/403, 3xx or 5xx, or not
// at all, leaves the server down as a failed initialize did.
// Bodies and SSE events are parsed as untrusted input (ParseUpstreamMessage):
// one the parser refuses ends that exchange with E_UPSTREAM_PROTOCOL (a
// refused tools/list leaves the server down, saying why); each POST stands
// alone, so nothing else of the connection is out of step.
#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <sstream>

#include "core/log.h"
#include "core/messages.h"
#include "core/url.h"
#include "execute/mcp_upstream_internal.h"
#include "execute/net_pin.h"
#include "execute/tool.h"

namespace tollgate {
namespace {

constexpr size_t kMaxBody = kMaxUpstreamMessage;
constexpr int kReadyWaitMs = 5000;
constexpr int kConnectTimeoutMs = 10000;

struct Reply {
  long status = 0;
  std::string body, content_type, session;
  bool truncated = false;
};

size_t OnBody(char* p, size_t size, size_t n, void* ud) {
  Reply* r = static_cast<Reply*>(ud);
  const size_t len = size * n;
  if (r->body.size() + len > kMaxBody) {
    r->truncated = true;
    return 0;  // abort: a response this large is not one we record
  }
  r->body.append(p, len);
  return len;
}

size_t OnHeader(char* p, size_t size, size_t n, void* ud) {
  Reply* r = static_cast<Reply*>(ud);
  std::string line(p, size * n);
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string k = line.substr(0, colon), v = line.substr(colon + 1);
  std::transform(k.begin(), k.end(), k.begin(), ::tolower);
  v.erase(0, v.find_first_not_of(" \t"));
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
  if (k == "content-type") r->content_type = v;
  if (k == "mcp-session-id") r->session = v;
  return size * n;
}

// The message of an SSE body whose id is `id` (a response) in *out, or
// null. An event whose data the parser refuses fails the body: it may have
// been the response.
Status FromSse(const std::string& body, int64_t id, Json* out) {
  *out = Json();
  std::istringstream in(body);
  std::string line, data;
  auto flush = [&]() -> Status {
    if (data.empty()) return Status::Ok();
    Json m;
    Status s = ParseUpstreamMessage(data, &m);
    data.clear();
    if (!s.ok()) return s;
    const bool response = m.is_object() && !m.contains("method") && m.contains("id") && m["id"] == id;
    if (response && out->is_null()) *out = std::move(m);
    return Status::Ok();
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (Status s = flush(); !s.ok()) return s;
    } else if (line.rfind("data:", 0) == 0) {
      std::string d = line.substr(5);
      if (!d.empty() && d[0] == ' ') d.erase(0, 1);
      if (!data.empty()) data += "\n";
      data += d;
    }
  }
  return flush();
}

// A JSON-RPC error's message in a non-2xx body (a 2026-07-28 server says
// there what it refused, e.g. -32020 for a header), as ": (code) text", or
// "" when the body holds none. Bounded: it goes into the call's error.
std::string ErrorTextOf(const std::string& body) {
  Json m;
  if (!ParseUpstreamMessage(body, &m).ok() || !m.is_object() || !m.contains("error") ||
      !m["error"].is_object())
    return "";
  const Json& e = m["error"];
  if (!e.contains("message") || !e["message"].is_string()) return "";
  const std::string code = e.contains("code") && e["code"].is_number_integer() ? e["code"].dump() : "?";
  return ": (" + code + ") " + TruncateUtf8(e["message"].get<std::string>(), 500);
}

class HttpUpstream : public McpUpstream {
 public:
  HttpUpstream(McpServerSpec spec, const ExecutePolicy& policy)
      : McpUpstream(std::move(spec)), allow_(policy.allow_cidrs) {
    static const bool curl_ready = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
    (void)curl_ready;
    supervisor_ = std::thread([this] { Supervise(); });
  }
  ~HttpUpstream() override { Stop(); }
  void Stop() override { StopSupervisor(); }

  Status Request(const std::string& method, const Json& params, int timeout_ms, Json* result) override {
    std::string why;
    if (!WaitReady(std::min(timeout_ms, kReadyWaitMs), &why))
      return Status::Error(errc::kUpstreamUnavailable, why);
    return Call(method, params, timeout_ms, result);
  }

 private:
  void Supervise() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
      }
      const auto up_since = std::chrono::steady_clock::now();
      Status st = Connect();
      if (st.ok()) {
        SetState(State::kReady);
        // Re-list now and then (an HTTP server's list_changed would need
        // a standing GET stream); stay until a listing fails.
        for (;;) {
          std::unique_lock<std::mutex> lock(mu_);
          if (cv_.wait_for(lock, std::chrono::seconds(60), [&] { return stop_; })) return;
          lock.unlock();
          if (!(st = ListTools()).ok()) break;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
      }
      log::Warn({"execute"}) << st.message() << " (down; tried again after a backoff)";
      SetState(State::kDown, st.message());
      if (!Backoff(up_since)) return;
    }
  }

  Status Connect() {
    {
      std::lock_guard<std::mutex> lock(session_mu_);
      session_.clear();
      version_.clear();
    }
    SetEra("");
    McpEra era = McpEra::kLegacy;
    if (Status st = Probe(&era); !st.ok()) return st;
    if (era == McpEra::kModern) {
      SetEra(kMcpModernVersion);
      return ListTools();
    }
    Json result;
    if (Status st = Call("initialize", McpInitializeParams(), kConnectTimeoutMs, &result); !st.ok())
      return st;
    const std::string version = McpLegacyVersion(result);
    {
      std::lock_guard<std::mutex> lock(session_mu_);
      version_ = version;
    }
    SetEra(version);
    Post(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, kConnectTimeoutMs, nullptr);
    return ListTools();
  }

  // server/discover, and in *era what its answer says (the header comment
  // has the rule). A body the parser refuses for more than not being JSON
  // (too deep, too large) is refused as any answer is.
  Status Probe(McpEra* era) {
    const int64_t id = next_id_++;
    const Json params = McpDiscoverParams();
    Reply r;
    Status st = Post(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", "server/discover"}, {"params", params}},
                     kConnectTimeoutMs, &r, McpModernHeaders("server/discover", params));
    if (!st.ok()) return st;
    const bool client_error = r.status >= 400 && r.status < 500 && r.status != 401 && r.status != 403;
    if (!client_error && (r.status < 200 || r.status >= 300)) {
      return Status::Error(errc::kUpstreamUnavailable, "upstream MCP server '" + spec_.name +
                                                           "' answered HTTP " + std::to_string(r.status) +
                                                           " to server/discover" + ErrorTextOf(r.body));
    }
    Json msg;
    const bool sse = r.content_type.rfind("text/event-stream", 0) == 0;
    Status parsed = sse ? FromSse(r.body, id, &msg) : ParseUpstreamMessage(r.body, &msg);
    if (!parsed.ok() && parsed.code() != errc::kInvalidJson) {
      const std::string what = std::string(sse ? "an event stream" : "a body") + " answering server/discover";
      return Status::Error(errc::kUpstreamProtocol, McpRefusal(spec_.name, what, parsed));
    }
    *era = parsed.ok() ? McpProbeEra(msg) : McpEra::kLegacy;  // empty or not JSON: legacy
    return Status::Ok();
  }

  // One request in the era of the connection, its answer as Request's.
  Status Call(const std::string& method, const Json& params, int timeout_ms, Json* result) {
    const bool modern = Modern();
    Json msg;
    Status st = Exchange(method, params, timeout_ms, &msg, modern);
    if (st.ok()) st = McpAnswer(spec_.name, method, msg, result);
    if (st.ok() && modern) st = McpModernResult(spec_.name, method, *result);
    return st;
  }

  Status ListTools() {
    Json result;
    Status st = Call("tools/list", Json::object(), kConnectTimeoutMs, &result);
    if (!st.ok()) return st;
    if (!result.is_object() || !result.contains("tools") || !result["tools"].is_array()) {
      return Status::Error(errc::kUpstreamProtocol,
                           "upstream MCP server '" + spec_.name + "' listed no tools array");
    }
    SetTools(result["tools"]);
    return Status::Ok();
  }

  // One request and its response message; `modern`: in the 2026-07-28
  // era (the envelope and the headers).
  Status Exchange(const std::string& method, const Json& params, int timeout_ms, Json* msg, bool modern) {
    const int64_t id = next_id_++;
    const Json sent = modern ? McpWithEnvelope(params) : params;
    Reply r;
    Status st = Post(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", sent}}, timeout_ms,
                     &r, modern ? McpModernHeaders(method, sent) : std::vector<std::string>{});
    if (!st.ok()) return st;
    // 2026-07-28 has no session to lose: its 404 is an unknown method.
    if (!modern && r.status == 404 && method != "initialize") {
      // The server forgot our session: the supervisor reconnects.
      SetState(State::kDown, "the server ended the MCP session");
      return Status::Error(errc::kUpstreamUnavailable,
                           "upstream MCP server '" + spec_.name + "' ended the session");
    }
    if (r.status < 200 || r.status >= 300) {
      return Status::Error(errc::kUpstreamUnavailable, "upstream MCP server '" + spec_.name +
                                                           "' answered HTTP " + std::to_string(r.status) +
                                                           ErrorTextOf(r.body));
    }
    if (method == "initialize" && !r.session.empty()) {
      std::lock_guard<std::mutex> lock(session_mu_);
      session_ = r.session;
    }
    const bool sse = r.content_type.rfind("text/event-stream", 0) == 0;
    if (Status parsed = sse ? FromSse(r.body, id, msg) : ParseUpstreamMessage(r.body, msg); !parsed.ok()) {
      const std::string what = std::string(sse ? "an event stream" : "a body") + " answering " + method;
      return Status::Error(errc::kUpstreamProtocol, McpRefusal(spec_.name, what, parsed));
    }
    if (!msg->is_object() || !msg->contains("id") || (*msg)["id"] != id) {
      return Status::Error(errc::kUpstreamProtocol,
                           "upstream MCP server '" + spec_.name + "' sent no JSON-RPC response to " + method);
    }
    return Status::Ok();
  }

  // POSTs `body` with the `extra` header lines; *r null for a notification
  // (the answer is not read).
  Status Post(const Json& body, int timeout_ms, Reply* r, const std::vector<std::string>& extra = {}) {
    Reply ignored;
    if (r == nullptr) r = &ignored;
    const auto fail = [&](const std::string& code, const std::string& why) {
      return Status::Error(code, "upstream MCP server '" + spec_.name + "': " + why);
    };
    NormalUrl url;
    std::string why;
    if (!NormalizeUrl(spec_.url, "", &url, &why)) return fail(errc::kUrlForbidden, why);
    Pin pin;
    switch (PinHost(url.host, allow_, &pin, &why)) {
      case PinResult::kForbidden:
        return fail(errc::kUrlForbidden, why);
      case PinResult::kUnresolved:
        return fail(errc::kUpstreamUnavailable, why);
      case PinResult::kOk:
        break;
    }
    curl_slist* hdrs = nullptr;
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: application/json, text/event-stream");
    {
      std::lock_guard<std::mutex> lock(session_mu_);
      if (!session_.empty()) hdrs = curl_slist_append(hdrs, ("Mcp-Session-Id: " + session_).c_str());
      if (!version_.empty()) hdrs = curl_slist_append(hdrs, ("MCP-Protocol-Version: " + version_).c_str());
    }
    for (const std::string& h : extra) hdrs = curl_slist_append(hdrs, h.c_str());
    for (const auto& [k, v] : spec_.headers) {
      std::string val, missing;
      if (!ExpandEnv(v, &val, &missing) || val.find_first_of("\r\n") != std::string::npos) {
        curl_slist_free_all(hdrs);
        return fail(errc::kUpstreamUnavailable,
                    "header " + k +
                        (missing.empty() ? " is not a valid value" : " needs the unset variable " + missing));
      }
      hdrs = curl_slist_append(hdrs, (k + ": " + val).c_str());
    }
    curl_slist* resolve = curl_slist_append(nullptr, PinnedResolveEntry(url.host, url.port, pin).c_str());
    const std::string payload = body.dump();
    CURL* c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url.full.c_str());
    PinConnection(c, resolve, &pin);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tollgate/1");
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    curl_slist_free_all(resolve);
    if (!pin.refused.empty()) return fail(errc::kUrlForbidden, pin.refused);
    if (r->truncated) return fail(errc::kUpstreamProtocol, "its response is larger than 16 MiB");
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      return fail(errc::kTimeout, "no answer within " + std::to_string(timeout_ms) + " ms");
    }
    if (rc != CURLE_OK) return fail(errc::kUpstreamUnavailable, curl_easy_strerror(rc));
    return Status::Ok();
  }

  const std::vector<Cidr> allow_;
  std::atomic<int64_t> next_id_{1};
  std::mutex session_mu_;
  std::string session_, version_;  // legacy era only: 2026-07-28 has neither
};

}  // namespace

std::shared_ptr<McpUpstream> StartHttpUpstream(McpServerSpec spec, const ExecutePolicy& policy) {
  return std::make_shared<HttpUpstream>(std::move(spec), policy);
}

}  // namespace tollgate
