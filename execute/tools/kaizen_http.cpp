// Kaizen's HTTP and web tools (docs/tools.md, "Kaizen's tools"): http_get,
// http_post, http_put, http_delete, fetch_url and extract_links are
// http_request with a fixed method (core/http_alias.h,
// FindBuiltinHttpAlias). The stage hands each its expansion ({url, method,
// headers?, json | body?}: execute/invocation_check.h), which runs through
// http_request's own code as a plain call, so allowed_methods, hosts, the
// SSRF guard, redirects and the decision check all hold; the method is
// never a grant. The result is http_request's data plus Kaizen's `output`:
// - http_*: the response's JSON when it parsed, else its text;
// - fetch_url: the text;
// - extract_links: the absolute URLs of the page's <a href> links, resolved
//   against the final URL (after redirects), each once, at most
//   kMaxLinks (execute/tools/html_links.h); also `links`, `count` and
//   `links_truncated`.
#include "core/http_alias.h"
#include "execute/tools/html_links.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

constexpr size_t kMaxLinks = 1000;

class KaizenHttp : public BuiltinTool {
 public:
  explicit KaizenHttp(std::string_view name) : BuiltinTool(name), http_(MakeHttpRequest()) {}

  Json Run(const Json& args, const ToolContext& ctx) const override {
    const HttpAlias* alias = FindBuiltinHttpAlias(name());
    if (alias == nullptr) return ToolFail(errc::kToolExec, "no built-in alias '" + name() + "'");
    Json call = args;
    if (!args.is_object() || !args.contains("method")) {
      // The agent's own arguments (a caller other than the stage, which
      // expands them first).
      Status s = ExpandHttpAlias(*alias, args, &call);
      if (!s.ok()) return ToolFail(s.code(), s.message());
    }
    call["method"] = alias->method;  // this tool's, whatever it was handed
    ToolContext plain = ctx;
    plain.alias = nullptr;  // not a configured alias: its method is not granted
    Json r = http_->Run(call, plain);
    if (!r.contains("data") || !r["data"].is_object()) return r;
    Json& data = r["data"];
    const std::string tool = name();
    if (tool == "extract_links") {
      if (!r.value("success", false)) return r;
      bool truncated = false;
      Json links = ExtractLinks(data.value("body", ""), data.value("url", ""), kMaxLinks, &truncated);
      data["links"] = links;
      data["count"] = links.size();
      data["links_truncated"] = truncated || data.value("truncated", false);
      data["output"] = std::move(links);
    } else if (tool == "fetch_url") {
      data["output"] = data.value("body", "");
    } else {
      data["output"] = data.contains("json") ? data["json"] : Json(data.value("body", ""));
    }
    return r;
  }

 private:
  std::unique_ptr<Tool> http_;
};

}  // namespace

std::unique_ptr<Tool> MakeKaizenHttpTool(std::string_view name) { return std::make_unique<KaizenHttp>(name); }

}  // namespace tollgate
