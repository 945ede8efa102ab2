// http_request {url, method?, headers?, query?, body? | json?, timeout_ms?,
// response_format?}: one HTTP(S) call under the agent's policy
// (agents.<agent_id>.http_request: base_url, allowed_methods,
// default_headers with ${env:NAME}, default_query, timeout_ms,
// response_format, max_response_chars) and the SSRF guard:
// - http and https only; no proxy from the environment;
// - the host is resolved once, here; every address it resolves to must be
//   allowed (execute/net_guard.h: global, or in execute.network.allow_cidrs);
// - curl connects only to that address: CURLOPT_RESOLVE pins it, and the
//   open-socket callback checks the actual sockaddr again (so nothing curl
//   resolves by itself, and no DNS rebinding, gets through);
// - the host must be in the agent's `hosts` list when it has one;
// - redirects are followed here, each hop checked the same way, at most
//   execute.network.max_redirects; a cross-origin hop (scheme, host or port
//   differs) keeps only the headers of CrossOriginHeader (credentials have
//   too many names to list: Ocp-Apim-Subscription-Key, X-Functions-Key, ...)
//   and no userinfo, and one that would re-send the method and body (307,
//   308, or 301/302 for a method other than POST) is refused with
//   E_CROSS_ORIGIN_REDIRECT rather than followed without them.
// The first URL is args.url resolved against base_url and normalised by
// core/invocation.h's HttpUrl, the very string decide matched and recorded
// as the decision's invocation (the stage checks that they are equal before
// running; execute/invocation_check.h); curl sends it as is (PATH_AS_IS).
// default_query pairs the call does not set are appended after that.
// The answer (data, also on E_HTTP_STATUS): status and the AI Orchestrator
// seed's status_code, the MVP's ok (2xx) and data (the parsed JSON, else the
// text), url, headers (a fixed few), body (always, as text, capped at
// max_response_chars), json (when parsed), truncated, redirects.
// The download itself stops at the byte cap (4 x max_response_chars + 4,
// the most that many characters take in UTF-8; web fetch lowers it with
// max_response_bytes, a key of its own policy that the policy file's schema
// does not offer): the transfer is ended there and the answer is the
// truncated body, so a server streaming without end costs neither time nor
// memory.
// Read-only for GET, HEAD and OPTIONS; mutating otherwise.
#include <curl/curl.h>
#include <netdb.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>

#include "core/invocation.h"
#include "core/url.h"
#include "execute/invocation_check.h"
#include "execute/net_pin.h"
#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

struct CurlInit {
  CurlInit() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether a header (lower-cased name) may follow a redirect to another
// origin: only those that say what the client accepts, nothing about who it
// is. No body crosses origins, so neither does Content-Type.
bool CrossOriginHeader(const std::string& lower) {
  for (const char* k : {"accept", "accept-language", "accept-encoding", "user-agent"}) {
    if (lower == k) return true;
  }
  return false;
}

struct Body {
  std::string data;
  size_t cap;
  bool truncated = false;  // bytes past the cap arrived: the transfer was ended
};

// Keeps the body up to its cap; past it, ends the transfer (a short count
// is CURLE_WRITE_ERROR, read as "truncated" below). The status and headers
// have all arrived by the first body byte.
size_t OnData(char* p, size_t size, size_t n, void* ud) {
  Body* b = static_cast<Body*>(ud);
  const size_t len = size * n;
  const size_t room = b->data.size() < b->cap ? b->cap - b->data.size() : 0;
  b->data.append(p, std::min(len, room));
  if (len <= room) return len;
  b->truncated = true;
  return 0;
}

// A body cut at a byte count may end inside a UTF-8 character: that
// partial character is dropped, not shown as U+FFFD.
void DropPartialUtf8Tail(std::string* s) {
  size_t k = s->size(), cont = 0;
  while (k > 0 && cont < 3 && (static_cast<unsigned char>((*s)[k - 1]) & 0xC0) == 0x80) {
    --k;
    ++cont;
  }
  if (k == 0) return;
  const unsigned char lead = static_cast<unsigned char>((*s)[k - 1]);
  const size_t want = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  if (want > cont && lead >= 0xC0 && lead <= 0xF4) s->resize(k - 1);
}

// The byte cap of a call's body: max_response_bytes when set (a positive
// integer; only web's own policy sets it), never more than max_chars
// characters can need.
size_t ByteCap(const Json& cfg, size_t max_chars) {
  const size_t for_chars = max_chars > (size_t{1} << 40) ? size_t{1} << 42 : max_chars * 4 + 4;
  const Json& b = cfg.contains("max_response_bytes") ? cfg["max_response_bytes"] : Json();
  if (!b.is_number_integer() || b.get<int64_t>() <= 0) return for_chars;
  return std::min<uint64_t>(b.get<uint64_t>(), for_chars);
}

size_t OnHeader(char* p, size_t size, size_t n, void* ud) {
  auto* h = static_cast<std::map<std::string, std::string>*>(ud);
  std::string line(p, size * n);
  const auto colon = line.find(':');
  if (line.rfind("HTTP/", 0) == 0) h->clear();  // a new response (after 100-continue)
  if (colon != std::string::npos) {
    std::string k = Lower(line.substr(0, colon));
    std::string v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
    (*h)[k] = v;
  }
  return size * n;
}

// The first `max` code points of UTF-8 `s`.
std::string TruncateChars(const std::string& s, size_t max, bool* truncated) {
  size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) {
      if (chars == max) break;
      ++chars;
    }
  }
  if (i < s.size()) *truncated = true;
  return s.substr(0, i);
}

// agents.<id>.http_request.hosts (decide checks it first; this is the last
// line of defence, applied to every redirect hop too): empty or absent = any
// host; "api.example.com" exact, "*.example.com" any subdomain.
bool HostAllowed(const Json& hosts, const std::string& host) {
  if (!hosts.is_array() || hosts.empty()) return true;
  const std::string h = Lower(host);
  for (const auto& e : hosts) {
    if (!e.is_string()) continue;
    const std::string p = Lower(e.get<std::string>());
    if (p == h) return true;
    if (p.size() > 2 && p.compare(0, 2, "*.") == 0 && h.size() > p.size() - 1 &&
        h.compare(h.size() - (p.size() - 1), p.size() - 1, p.substr(1)) == 0) {
      return true;
    }
  }
  return false;
}

bool ValidHeaderPart(const std::string& s) { return s.find_first_of("\r\n") == std::string::npos; }

// One call's request, as read from its args and the agent's policy; the
// redirect loop updates method, body and headers.
struct HttpCall {
  std::string method, body, format;
  std::map<std::string, std::pair<std::string, std::string>> headers;  // lower name -> (name, value)
  Json query;
  int64_t timeout_ms = 0;
  size_t max_chars = 0, max_bytes = 0;
};

// Each reader below returns null when the args are good, else the failure.
Json ReadMethod(const Json& args, const Json& cfg, const ToolContext& ctx, HttpCall* call) {
  std::string& method = call->method;
  method = cfg.value("default_method", "GET");
  // The MVP seed's `path` is the same argument: relative to base_url or absolute.
  if (args.contains("url") && args.contains("path"))
    return ToolFail(errc::kInvalidArgs, "give url or path, not both");
  const std::string url_arg = HttpUrlArg(args);
  if (url_arg.empty()) return ToolFail(errc::kInvalidArgs, "url (or path) is required as a string");
  if (!StringArg(args, "method", &method, false))
    return ToolFail(errc::kInvalidArgs, "method must be a string");
  method = Upper(method);
  if (method.empty() || method.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos) {
    return ToolFail(errc::kInvalidArgs, "method must be a word such as GET or POST");
  }
  Json allowed = cfg.value("allowed_methods", Json::array({"GET", "HEAD"}));
  if (ctx.alias != nullptr) allowed = Json::array({ctx.alias->method});  // the operator's grant, exactly
  bool method_ok = false;
  for (const auto& m : allowed) method_ok = method_ok || (m.is_string() && Upper(m) == method);
  if (!method_ok)
    return ToolFail(errc::kMethodNotAllowed, method + " is not in this agent's allowed_methods");
  return Json();
}

// Headers: configured defaults, then the call's own.
Json ReadHeaders(const Json& args, const Json& cfg, const ToolContext& ctx, HttpCall* call) {
  Json defaults = cfg.value("default_headers", Json::object());
  if (ctx.alias != nullptr) {
    for (const auto& [k, v] : ctx.alias->headers.items()) defaults[k] = v;
  }
  for (const auto& [k, v] : defaults.items()) {
    std::string val, missing;
    if (!v.is_string() || !ExpandEnv(v.get<std::string>(), &val, &missing)) {
      return ToolFail(errc::kToolExec,
                      "default header " + k +
                          (missing.empty() ? " is not a string" : " needs the unset variable " + missing));
    }
    call->headers[Lower(k)] = {k, val};
  }
  const Json& h = args.value("headers", Json::object());
  if (!h.is_object()) return ToolFail(errc::kInvalidArgs, "headers must be an object of strings");
  for (const auto& [k, v] : h.items()) {
    if (!v.is_string() || k.empty() || !ValidHeaderPart(k) || !ValidHeaderPart(v.get<std::string>()) ||
        k.find(':') != std::string::npos) {
      return ToolFail(errc::kInvalidArgs, "header " + k + " is not a valid header");
    }
    call->headers[Lower(k)] = {k, v.get<std::string>()};
  }
  return Json();
}

// The payload, query, timeout, response format and size caps.
Json ReadPayloadAndOptions(const Json& args, const Json& cfg, HttpCall* call) {
  // `data` is the AI Orchestrator seed's name for the JSON payload
  // (docs/tools.md): the same as `json`, never both.
  if (args.contains("json") && args.contains("data")) {
    return ToolFail(errc::kInvalidArgs, "json and data are the same payload: give one");
  }
  if (args.contains("json") || args.contains("data")) {
    call->body = (args.contains("json") ? args["json"] : args["data"]).dump();
    if (!call->headers.count("content-type"))
      call->headers["content-type"] = {"Content-Type", "application/json"};
  } else if (!StringArg(args, "body", &call->body, false)) {
    return ToolFail(errc::kInvalidArgs, "body must be a string (or use json)");
  }
  call->query = cfg.value("default_query", Json::object());
  if (args.contains("query")) {
    if (!args["query"].is_object()) return ToolFail(errc::kInvalidArgs, "query must be an object");
    for (const auto& [k, v] : args["query"].items()) call->query[k] = v;
  }
  call->timeout_ms = cfg.value("timeout_ms", 10000);
  if (args.contains("timeout_ms") && args["timeout_ms"].is_number_integer()) {
    call->timeout_ms = std::clamp<int64_t>(args["timeout_ms"].get<int64_t>(), 1, call->timeout_ms);
  }
  call->format = cfg.value("response_format", "auto");
  if (!StringArg(args, "response_format", &call->format, false) ||
      (call->format != "auto" && call->format != "json" && call->format != "text")) {
    return ToolFail(errc::kInvalidArgs, "response_format must be auto, json or text");
  }
  call->max_chars = cfg.value("max_response_chars", 20000);
  call->max_bytes = ByteCap(cfg, call->max_chars);
  return Json();
}

// The first URL: the decision's, plus the default_query pairs it lacks.
Json FirstUrl(const Json& args, const Json& cfg, const ToolContext& ctx, const HttpCall& call,
              NormalUrl* url) {
  std::string why, full;
  const std::string base = cfg.value("base_url", "");
  if (!HttpUrl(args, base, url, &full, &why)) return ToolFail(errc::kUrlForbidden, why);
  // The stage checked this already (execute/invocation_check.h); a tool
  // run with a decision never fetches anything else.
  if (ctx.decision.is_object() && ctx.decision.contains("invocation") &&
      ctx.decision["invocation"].is_string() &&
      !SameInvocation(ctx.decision["invocation"], "http_request:" + call.method + " " + full)) {
    return ToolFail(errc::kDecisionMismatch, "the URL is not the decision's; it was not fetched");
  }
  // HttpUrl appended args.query; the operator's default_query fills in the rest.
  std::vector<std::pair<std::string, std::string>> extra;
  for (const auto& [k, v] : call.query.items()) {
    if (!(args.contains("query") && args["query"].contains(k))) {
      extra.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  url->full = AppendQuery(full, extra);
  return Json();
}

// What one hop answered.
struct HopAnswer {
  long status = 0;
  std::string connected;                  // the address curl connected to
  std::map<std::string, std::string> rh;  // response headers, lower-case names
  Body out{std::string(), 0};
};

// 2. Connect to the pinned address only and send the request; null when a
// response arrived, else the failure.
Json SendHop(const NormalUrl& url, const HttpCall& call, Pin& pin, int64_t elapsed, HopAnswer* ans) {
  CURL* c = curl_easy_init();
  curl_slist* resolve = curl_slist_append(nullptr, PinnedResolveEntry(url.host, url.port, pin).c_str());
  curl_slist* hdrs = nullptr;
  for (const auto& [lk, kv] : call.headers)
    hdrs = curl_slist_append(hdrs, (kv.first + ": " + kv.second).c_str());
  ans->out = Body{std::string(), call.max_bytes};
  curl_easy_setopt(c, CURLOPT_URL, url.full.c_str());
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);  // already normalised: send it byte for byte
  PinConnection(c, resolve, &pin);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(call.timeout_ms - elapsed));
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  if (call.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  // A body-less POST, PUT or PATCH still says Content-Length: 0, or a
  // server waits for a body that never comes.
  if (!call.body.empty() || call.method == "POST" || call.method == "PUT" || call.method == "PATCH") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, call.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(call.body.size()));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans->out);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &ans->rh);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "tollgate/1");
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ans->status);
  char* primary = nullptr;
  curl_easy_getinfo(c, CURLINFO_PRIMARY_IP, &primary);
  ans->connected = primary ? primary : "";
  curl_easy_cleanup(c);
  curl_slist_free_all(resolve);
  curl_slist_free_all(hdrs);
  if (!pin.refused.empty())
    return ToolFail(errc::kUrlForbidden, "connection refused by the guard: " + pin.refused);
  if (rc == CURLE_WRITE_ERROR && ans->out.truncated) rc = CURLE_OK;  // OnData ended it at the cap
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return ToolFail(errc::kHttpTimeout, "timed out after " + std::to_string(call.timeout_ms) + " ms", true);
  }
  if (rc != CURLE_OK)
    return ToolFail(errc::kHttp, std::string("request failed: ") + curl_easy_strerror(rc), true);
  return Json();
}

// 3. A redirect to `location`: checks the next hop like the first and moves
// `url` to it; null when it is to be followed, else the failure.
Json FollowRedirect(const std::string& location, long status, const Json& hops, HttpCall* call,
                    NormalUrl* url) {
  NormalUrl next;
  std::string why;
  if (!NormalizeUrl(location, url->full, &next, &why, Userinfo::kDrop)) {
    return ToolFail(errc::kUrlForbidden, "redirect: " + why);
  }
  if (status == 303 || ((status == 301 || status == 302) && call->method == "POST")) {
    call->method = call->method == "HEAD" ? "HEAD" : "GET";
    call->body.clear();
    call->headers.erase("content-type");
  }
  const bool cross = next.scheme != url->scheme || next.host != url->host || next.port != url->port;
  if (cross && (!call->body.empty() || !IsReadOnlyMethod(call->method))) {
    // The method and body were decided for this origin: not re-sent
    // to another, and not silently sent without the body either.
    Json r = ToolFail(errc::kCrossOriginRedirect,
                      "HTTP " + std::to_string(status) + " redirects this " + call->method +
                          " to another origin (" + next.full +
                          "); following it would re-send the request there, so it was not followed");
    r["data"] = {{"status", status},
                 {"status_code", status},
                 {"url", url->full},
                 {"location", next.full},
                 {"redirects", hops}};
    return r;
  }
  if (cross) {
    for (auto it = call->headers.begin(); it != call->headers.end();) {
      it = CrossOriginHeader(it->first) ? std::next(it) : call->headers.erase(it);
    }
  }
  *url = next;
  return Json();
}

// 4. The response: status, a few headers, the body as text and, when
// wanted and whole, as JSON; E_HTTP_STATUS (with the same data) for >= 400.
Json ResponseResult(HopAnswer& ans, const HttpCall& call, const NormalUrl& url, const Json& hops) {
  const long status = ans.status;
  auto& rh = ans.rh;
  bool truncated = ans.out.truncated;
  if (truncated) DropPartialUtf8Tail(&ans.out.data);
  std::string text = TruncateChars(ToValidUtf8(ans.out.data), call.max_chars, &truncated);
  Json data{{"status", status},
            {"status_code", status},
            {"ok", status >= 200 && status < 300},
            {"url", url.full},
            {"truncated", truncated}};
  Json keep = Json::object();
  for (const char* k :
       {"content-type", "content-length", "location", "etag", "last-modified", "retry-after"}) {
    if (rh.count(k)) keep[k] = ToValidUtf8(rh[k]);
  }
  data["headers"] = keep;
  if (hops.size() > 1) data["redirects"] = hops;
  const std::string ctype = Lower(rh.count("content-type") ? rh["content-type"] : "");
  const bool want_json =
      call.format == "json" || (call.format == "auto" && ctype.find("json") != std::string::npos);
  Json parsed;
  // A server's body is untrusted input: the result (and its event)
  // wraps it a few levels deeper, and must stay readable.
  if (want_json && !truncated && ParseInputJson(ans.out.data, &parsed).ok()) {
    data["json"] = parsed;
    data["data"] = std::move(parsed);
  } else {
    if (call.format == "json") data["json_error"] = "the body is not JSON (or was truncated)";
    data["data"] = text;
  }
  data["body"] = std::move(text);
  if (status >= 400) {
    Json r = ToolFail(errc::kHttpStatus, "HTTP " + std::to_string(status), status >= 500 || status == 429);
    r["data"] = data;
    return r;
  }
  return ToolOk(data);
}

class HttpRequest : public BuiltinTool {
 public:
  HttpRequest() : BuiltinTool("http_request") { static CurlInit once; }
  // decide's answer when it gave one: it knew the policy's default_method
  // (a call with no method may be a POST).
  bool ReadOnly(const Json& args, const Json& decision) const override {
    if (decision.is_object() && decision.contains("read_only") && decision["read_only"].is_boolean()) {
      return decision["read_only"].get<bool>();
    }
    std::string m = args.contains("method") && args["method"].is_string() ? Upper(args["method"]) : "GET";
    return IsReadOnlyMethod(m);
  }

  Json Run(const Json& args, const ToolContext& ctx) const override {
    const Json cfg = ctx.policy->AgentHttp(ctx.org_id, ctx.agent_id);
    HttpCall call;
    NormalUrl url;
    if (Json fail = ReadMethod(args, cfg, ctx, &call); !fail.is_null()) return fail;
    if (Json fail = ReadHeaders(args, cfg, ctx, &call); !fail.is_null()) return fail;
    if (Json fail = ReadPayloadAndOptions(args, cfg, &call); !fail.is_null()) return fail;
    if (Json fail = FirstUrl(args, cfg, ctx, call, &url); !fail.is_null()) return fail;

    const auto t0 = std::chrono::steady_clock::now();
    Json hops = Json::array();
    for (int hop = 0;; ++hop) {
      if (!HostAllowed(cfg.value("hosts", Json::array()), url.host)) {
        return ToolFail(errc::kUrlForbidden, url.host + " is not in this agent's hosts");
      }
      // 1. Resolve once and check every address.
      Pin pin;
      std::string why;
      switch (PinHost(url.host, ctx.policy->allow_cidrs, &pin, &why)) {
        case PinResult::kForbidden:
          return ToolFail(errc::kUrlForbidden, why);
        case PinResult::kUnresolved:
          return ToolFail(errc::kHttp, why, true);
        case PinResult::kOk:
          break;
      }

      // 2. Connect to that address only.
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
              .count();
      if (elapsed >= call.timeout_ms)
        return ToolFail(errc::kHttpTimeout, "timed out after " + std::to_string(call.timeout_ms) + " ms",
                        true);
      HopAnswer ans;
      if (Json fail = SendHop(url, call, pin, elapsed, &ans); !fail.is_null()) return fail;
      hops.push_back({{"url", url.full}, {"status", ans.status}, {"address", ans.connected}});

      // 3. A redirect: check the next hop like the first.
      auto loc = ans.rh.find("location");
      if (ans.status >= 300 && ans.status < 400 && ans.status != 304 && loc != ans.rh.end()) {
        if (hop + 1 > ctx.policy->max_redirects) {
          return ToolFail(errc::kUrlForbidden,
                          "more than " + std::to_string(ctx.policy->max_redirects) + " redirects");
        }
        if (Json fail = FollowRedirect(loc->second, ans.status, hops, &call, &url); !fail.is_null())
          return fail;
        continue;
      }
      return ResponseResult(ans, call, url, hops);  // 4. The response.
    }
  }
};

}  // namespace

std::unique_ptr<Tool> MakeHttpRequest() { return std::make_unique<HttpRequest>(); }

}  // namespace tollgate
