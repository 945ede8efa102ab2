// web (Duragent's; docs/tools.md, "web") {action: search | fetch}.
//
// fetch {url}: GET an absolute http(s) URL with http_request's own code
// (the SSRF guard, address pinning, redirects checked hop by hop, the
// agent's `hosts` list), run under a policy of web's: GET only, 30 s,
// text, the download ended at kMaxDownloadBytes (truncated: true; the rest
// is never read). Nothing else of the agent's http_request applies: its
// base_url, default_headers and default_query are for its own API, not for
// any page it reads. An HTML page becomes Markdown (html_markdown.h), other
// text passes through, and binary content is named, not shown. At most
// kMaxOutputBytes of Markdown come back; past that, a notice line says how
// much was cut.
// data: {url, final_url, status, content_type, title, markdown, truncated,
// download_truncated, markdown_truncated, bytes}.
//
// search {query, count?}: the Brave Search API (execute.web.search_url,
// X-Subscription-Token = execute.web.api_key, default ${env:BRAVE_API_KEY})
// through endpoint_call.h; no key: E_NOT_CONFIGURED. data: {query, count,
// results: [{title, url, description}]} from Brave's web.results.
#include "core/url.h"
#include "execute/net_pin.h"
#include "execute/tools/endpoint_call.h"
#include "execute/tools/html_markdown.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

constexpr size_t kMaxDownloadBytes = 1 << 20;
constexpr size_t kMaxOutputBytes = 50 << 10;
constexpr size_t kNoticeRoom = 200;            // the notice fits in the 50 KB
constexpr size_t kMaxMarkdownBytes = 4 << 20;  // conversion stops here (a blow-up guard)
constexpr int kFetchTimeoutMs = 30000;
constexpr size_t kMaxQueryChars = 400;  // Brave's own limit
constexpr const char* kNotConfigured = "E_NOT_CONFIGURED";

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The first `max` bytes of UTF-8 `s`, never splitting a character.
std::string CutUtf8(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t k = max;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return s.substr(0, k);
}

bool TextLike(const std::string& ctype) {
  return ctype.empty() || ctype.rfind("text/", 0) == 0 || ctype.find("json") != std::string::npos ||
         ctype.find("xml") != std::string::npos || ctype.find("javascript") != std::string::npos;
}

bool LooksLikeHtml(const std::string& ctype, const std::string& body) {
  if (ctype.find("html") != std::string::npos) return true;
  if (!ctype.empty()) return false;
  const size_t b = body.find_first_not_of(" \t\r\n");
  if (b == std::string::npos || body[b] != '<') return false;
  const std::string head = Lower(body.substr(b, 256));
  return head.find("<!doctype html") == 0 || head.find("<html") != std::string::npos;
}

class Web : public BuiltinTool {
 public:
  Web() : BuiltinTool("web"), http_(MakeHttpRequest()) {}

  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string action;
    if (!StringArg(args, "action", &action))
      return ToolFail(errc::kInvalidArgs, "action must be search or fetch");
    if (action == "fetch") return Fetch(args, ctx);
    if (action == "search") return Search(args, ctx);
    return ToolFail(errc::kInvalidArgs, "action must be search or fetch");
  }

 private:
  Json Fetch(const Json& args, const ToolContext& ctx) const {
    std::string arg;
    if (!StringArg(args, "url", &arg) || arg.empty()) {
      return ToolFail(errc::kInvalidArgs, "fetch needs url, an http or https URL");
    }
    NormalUrl url;
    std::string why;
    if (!NormalizeUrl(arg, "", &url, &why)) return ToolFail(errc::kUrlForbidden, why);

    ExecutePolicy p;  // what http_request reads: its section, the guard's CIDRs, redirects
    p.allow_cidrs = ctx.policy->allow_cidrs;
    p.max_redirects = ctx.policy->max_redirects;
    p.http_defaults = {{"allowed_methods", Json::array({"GET"})},
                       {"timeout_ms", kFetchTimeoutMs},
                       {"response_format", "text"},
                       {"max_response_chars", kMaxDownloadBytes},
                       {"max_response_bytes", kMaxDownloadBytes}};  // the download stops there
    const Json agent = ctx.policy->AgentHttp(ctx.org_id, ctx.agent_id);
    if (agent.contains("hosts")) p.http_defaults["hosts"] = agent["hosts"];
    ToolContext plain = ctx;
    plain.policy = &p;
    plain.alias = nullptr;
    plain.decision = Json::object();  // decided as builtin:web:fetch, which the stage checked
    const Json call{{"url", url.full},
                    {"method", "GET"},
                    {"headers", {{"Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"}}}};
    Json r = http_->Run(call, plain);
    if (!r.contains("data") || !r["data"].is_object()) return r;  // the guard, a timeout: its own error

    const Json& d = r["data"];
    const Json& headers = d.value("headers", Json::object());
    const std::string ctype = headers.is_object() ? headers.value("content-type", "") : "";
    std::string body = d.value("body", "");
    bool download_cut = d.value("truncated", false);
    if (body.size() > kMaxDownloadBytes) {
      body = CutUtf8(body, kMaxDownloadBytes);
      download_cut = true;
    }
    Json data{{"url", url.full},
              {"final_url", d.value("url", url.full)},
              {"status", d.value("status", 0)},
              {"content_type", ctype},
              {"bytes", body.size()}};
    if (!r.value("success", false)) {  // E_HTTP_STATUS: what the server said, briefly
      data["body"] = CutUtf8(body, 2048);
      r["data"] = data;
      return r;
    }
    std::string title, markdown;
    bool complete = true;
    const std::string lower = Lower(ctype);
    if (LooksLikeHtml(lower, body)) {
      MarkdownPage page = HtmlToMarkdown(body, data["final_url"].get<std::string>(), kMaxMarkdownBytes);
      title = std::move(page.title);
      markdown = std::move(page.markdown);
      complete = page.complete;
    } else if (TextLike(lower)) {
      markdown = body;
    } else {
      markdown = "[" + ctype + " content, " + std::to_string(body.size()) + " bytes: not text, not shown]";
    }
    const bool markdown_cut = markdown.size() > kMaxOutputBytes || !complete;
    if (markdown_cut) {
      const size_t total = markdown.size();
      markdown = CutUtf8(markdown, kMaxOutputBytes - kNoticeRoom);
      const size_t cut = total - markdown.size();
      markdown += "\n\n[truncated: " + std::string(complete ? "" : "more than ") + std::to_string(cut) +
                  " bytes of Markdown omitted; " + std::to_string(markdown.size()) + " of " +
                  (complete ? "" : "over ") + std::to_string(total) + " shown]";
    }
    data["title"] = title;
    data["markdown"] = std::move(markdown);
    data["download_truncated"] = download_cut;
    data["markdown_truncated"] = markdown_cut;
    data["truncated"] = download_cut || markdown_cut;
    return ToolOk(std::move(data));
  }

  Json Search(const Json& args, const ToolContext& ctx) const {
    const ExecutePolicy& p = *ctx.policy;
    std::string query;
    if (!StringArg(args, "query", &query) || query.empty()) {
      return ToolFail(errc::kInvalidArgs, "search needs query, a non-empty string");
    }
    size_t chars = 0;
    for (unsigned char c : query) chars += (c & 0xC0) != 0x80;
    if (chars > kMaxQueryChars) {
      return ToolFail(errc::kInvalidArgs,
                      "query is at most " + std::to_string(kMaxQueryChars) + " characters");
    }
    int64_t count = 5;
    if (args.contains("count")) {
      if (!args["count"].is_number_integer() || args["count"].get<int64_t>() < 1 ||
          args["count"].get<int64_t>() > 20) {
        return ToolFail(errc::kInvalidArgs, "count must be an integer from 1 to 20");
      }
      count = args["count"].get<int64_t>();
    }
    std::string key, missing;
    if (!ExpandEnv(p.web_api_key, &key, &missing) || key.empty()) {
      return ToolFail(kNotConfigured,
                      "web search is not configured: it needs a Brave Search API key. Set " +
                          (missing.empty() ? std::string("BRAVE_API_KEY") : missing) +
                          " in tollgate's environment, or execute.web.api_key in the policy file "
                          "(docs/tools.md, \"web\")");
    }
    if (key.find_first_of("\r\n") != std::string::npos) {
      return ToolFail(kNotConfigured, "web search is not configured: its API key holds a line break");
    }
    NormalUrl base;
    std::string why;
    if (!NormalizeUrl(p.web_search_url, "", &base, &why)) {
      return ToolFail(kNotConfigured, "execute.web.search_url is not an http(s) URL: " + why);
    }
    EndpointCall call;
    call.what = "the web search endpoint";
    call.url = AppendQuery(base.full, {{"q", query}, {"count", std::to_string(count)}});
    call.headers = {"Accept: application/json", "X-Subscription-Token: " + key};
    call.timeout_ms = p.web_timeout_ms;
    EndpointAnswer answer;
    Json error;
    if (!CallEndpoint(call, p.allow_cidrs, &answer, &error)) return error;

    Json results = Json::array();
    const Json* list = nullptr;
    if (answer.json.is_object() && answer.json.contains("web") && answer.json["web"].is_object() &&
        answer.json["web"].contains("results") && answer.json["web"]["results"].is_array()) {
      list = &answer.json["web"]["results"];
    }
    auto text = [](const Json& o, const char* k, size_t max) {
      if (!o.contains(k) || !o[k].is_string()) return std::string();
      // Brave marks the matched words with <strong>: Markdown, as fetch gives.
      return CutUtf8(HtmlToMarkdown(CutUtf8(o[k].get<std::string>(), 4 * max), "", 4 * max).markdown, max);
    };
    for (size_t i = 0; list != nullptr && i < list->size() && results.size() < static_cast<size_t>(count);
         ++i) {
      const Json& e = (*list)[i];
      if (!e.is_object() || !e.contains("url") || !e["url"].is_string()) continue;
      NormalUrl u;
      if (!NormalizeUrl(e["url"].get<std::string>().substr(0, 4096), "", &u, &why, Userinfo::kDrop)) continue;
      results.push_back({{"title", text(e, "title", 1024)},
                         {"url", u.full},
                         {"description", text(e, "description", 4096)}});
    }
    return ToolOk({{"query", query}, {"count", results.size()}, {"results", std::move(results)}});
  }

  std::unique_ptr<Tool> http_;
};

}  // namespace

std::unique_ptr<Tool> MakeWeb() { return std::make_unique<Web>(); }

}  // namespace tollgate
