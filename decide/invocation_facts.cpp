// Decide's view of a request's invocation and arguments
// (decide/invocation_facts.h).
#include "decide/invocation_facts.h"

#include <algorithm>

#include "core/invocation.h"
#include "core/tool_catalog.h"
#include "decide/policy_engine.h"

namespace tollgate {
namespace {

// "ls" of "/bin/ls -la": the first word, without its directory.
std::string CommandName(const std::string& cmdline) {
  size_t b = cmdline.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = cmdline.find_first_of(" \t", b);
  std::string first = cmdline.substr(b, e == std::string::npos ? std::string::npos : e - b);
  size_t slash = first.rfind('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

// Path-component prefix: "/etc" covers "/etc" and "/etc/x", not "/etcetera".
bool UnderPrefix(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return false;
  if (prefix == "/") return !path.empty() && path[0] == '/';
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

}  // namespace

EffectiveHttp HttpFor(const Policy::Compiled& c, const Tier* agent) {
  EffectiveHttp e;
  for (const Tier* t : {&c.org, agent}) {
    if (t == nullptr || !t->has_http) continue;
    const HttpConfig& h = t->http;
    if (h.has_base_url) e.base_url = &h.base_url;
    if (h.has_default_method) e.default_method = &h.default_method;
    if (h.has_methods) e.methods = &h.methods;
    if (h.has_auto_approve) e.auto_approve = h.auto_approve;
    if (h.has_hosts) e.hosts_from = &h;
    if (!h.aliases.empty()) e.aliases[t == agent ? 0 : 1] = &h.aliases;
  }
  return e;
}

const HttpAlias* EffectiveHttp::FindAlias(const std::string& tool) const {
  for (const auto* m : aliases) {
    if (m == nullptr) continue;
    auto it = m->find(tool);
    if (it != m->end()) return &it->second;
  }
  return FindBuiltinHttpAlias(tool);  // Kaizen's http_get and kin: no policy alias has their names
}

std::string ResolveInvocation(const EffectiveHttp& http, InvocationFacts* f) {
  f->alias = http.FindAlias(*f->tool);
  if (f->alias == nullptr) {
    if (*f->tool == "http_request") f->http_args = f->args;
    return BuildInvocation(*f->tool, *f->args, BaseUrlOf(&http), DefaultMethodOf(&http), f->action);
  }
  f->alias_status = ExpandHttpAlias(*f->alias, *f->args, &f->alias_args);
  if (!f->alias_status.ok() && f->probe && !f->alias->builtin) {
    // No arguments: decided as the call the operator configured, its
    // {placeholders} unfilled, so what tools/list says about asking is
    // what decide does with any call that fits (decide/tool_access.h).
    f->alias_status = Status::Ok();
    f->alias_args = {{"url", f->alias->url}, {"method", f->alias->method}};
  }
  if (!f->alias_status.ok()) return "http_request:" + f->alias->method + " " + f->alias->url;
  f->http_args = &f->alias_args;
  return BuildInvocation("http_request", f->alias_args, BaseUrlOf(&http), f->alias->method);
}

const std::string& BaseUrlOf(const EffectiveHttp* http) {
  static const std::string kNone;
  return http != nullptr && http->base_url != nullptr ? *http->base_url : kNone;
}

const std::string& DefaultMethodOf(const EffectiveHttp* http) {
  static const std::string kGet = "GET";
  return http != nullptr && http->default_method != nullptr ? *http->default_method : kGet;
}

std::string InvocationOf(const Policy* policy, const Json& request) {
  const std::string tool = request.value("tool", "");
  const Json& args = request.contains("args") ? request["args"] : Json::object();
  if (policy == nullptr) return BuildInvocation(tool, args, BaseUrlOf(nullptr), "GET", ActionOf(request));
  const auto& c = policy->compiled(request.value("org_id", ""));
  auto it = c.agents.find(request.value("agent_id", ""));
  EffectiveHttp h = HttpFor(c, it == c.agents.end() ? nullptr : &it->second);
  InvocationFacts f = ReadEnvelope(request);
  return ResolveInvocation(h, &f);
}

InvocationFacts ReadEnvelope(const Json& req) {
  static const std::string kEmpty;
  static const Json kEmptyArgs = Json::object();
  auto str = [&](const char* k) -> const std::string* {
    auto it = req.find(k);
    return it != req.end() && it->is_string() ? &it->get_ref<const std::string&>() : &kEmpty;
  };
  InvocationFacts f;
  f.org = str("org_id");
  f.agent = str("agent_id");
  f.session = str("session_id");
  f.request_id = str("request_id");
  f.tool = str("tool");
  auto ait = req.find("args");
  f.args = ait != req.end() ? &*ait : &kEmptyArgs;
  f.action = ActionOf(req);
  return f;
}

void ParseArgs(const EffectiveHttp& http, InvocationFacts* f, std::string* subject) {
  const std::string& tool = *f->tool;
  if (f->alias != nullptr && f->http_args == nullptr) {
    f->method = f->alias->method;  // read_only still says what it would do; the call is denied
  } else if (f->http_args != nullptr) {
    f->method = HttpMethod(*f->http_args, f->alias ? f->alias->method : DefaultMethodOf(&http));
    std::string ignored;
    f->url_ok = HttpUrl(*f->http_args, BaseUrlOf(&http), &f->url, &ignored, &f->url_error);
  } else if (IsCommandTool(tool) || (tool == "background_process" && f->action == "spawn")) {
    // background_process spawn runs a command line too: the same checks
    // hold for each of its simple commands (docs/policy.md, "Command lines").
    const bool spawn = !IsCommandTool(tool);
    if (spawn) *subject = FileSubject(tool, *f->args, f->action);
    f->command = CommandName(CommandLine(*f->args));
    f->command_line = spawn || !IsCommandArgv(*f->args);
    f->line = spawn ? ParseShellLine(CommandLine(*f->args)) : CommandCallOf(*f->args);
    for (const auto& c : f->line.commands) {
      const auto slash = c.argv[0].rfind('/');
      f->command_names.push_back(slash == std::string::npos ? c.argv[0] : c.argv[0].substr(slash + 1));
    }
  } else if (IsFileTool(tool)) {
    *subject = FileSubject(tool, *f->args, f->action);
    if (!subject->empty() && f->action.empty()) f->file_path = subject->substr(tool.size() + 1);
  } else {
    *subject = FileSubject(tool, *f->args, f->action);  // "builtin:TOOL" for an action call
  }
}

bool RuleMatches(const Rule& r, const InvocationFacts& f) {
  if (r.tools.size() != 0 && r.tools.FirstMatch(*f.tool) < 0) return false;
  const Condition& w = r.when;
  if (!w.methods.empty() &&
      (f.method.empty() || std::find(w.methods.begin(), w.methods.end(), f.method) == w.methods.end())) {
    return false;
  }
  if (w.has_hosts && (!f.url_ok || w.hosts.FirstMatch(f.url.host) < 0)) return false;
  if (!w.path_prefixes.empty()) {
    if (!f.url_ok) return false;
    bool any = false;
    for (const auto& p : w.path_prefixes) any = any || f.url.path.rfind(p, 0) == 0;
    if (!any) return false;
  }
  if (!w.file_prefixes.empty()) {
    if (f.file_path.empty()) return false;
    bool any = false;
    for (const auto& p : w.file_prefixes) any = any || UnderPrefix(f.file_path, p);
    if (!any) return false;
  }
  if (!w.commands.empty()) {
    auto named = [&](const std::string& n) {
      return !n.empty() && std::find(w.commands.begin(), w.commands.end(), n) != w.commands.end();
    };
    if (r.verdict == "allow") {
      if (!f.line.ok() || f.command_names.empty()) return false;
      for (const auto& n : f.command_names) {
        if (!named(n)) return false;
      }
    } else {
      bool any = named(f.command);
      for (const auto& n : f.command_names) any = any || named(n);
      if (!any) return false;
    }
  }
  return true;
}

}  // namespace tollgate
