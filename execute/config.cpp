#include "execute/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/url.h"
#include "execute/tool.h"

namespace tollgate {
namespace {

Json ScalarToJson(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(s.c_str(), &end, 10);
  if (errno == 0 && end && *end == '\0') return i;
  double d = std::strtod(s.c_str(), &end);
  if (end && *end == '\0' && s.find_first_of("0123456789") != std::string::npos) return d;
  return s;
}

Json NodeToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& x : n) a.push_back(NodeToJson(x));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = NodeToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar:
      return ScalarToJson(n);
    default:
      return nullptr;
  }
}

Status Bad(const std::string& what) { return Status::Error(errc::kInvalidArgs, "policy: execute: " + what); }

template <typename T>
Status Number(const Json& sec, const char* key, T* out, double min, double max) {
  auto it = sec.find(key);
  if (it == sec.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return Bad(std::string(key) + " must be a number");
  double v = it->get<double>();
  if (v < min || v > max) return Bad(std::string(key) + " out of range");
  *out = static_cast<T>(v);
  return Status::Ok();
}

Status Strings(const Json& sec, const char* key, std::vector<std::string>* out) {
  auto it = sec.find(key);
  if (it == sec.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return Bad(std::string(key) + " must be a list");
  out->clear();
  for (const auto& x : *it) {
    if (!x.is_string()) return Bad(std::string(key) + " must be a list of strings");
    out->push_back(x.get<std::string>());
  }
  return Status::Ok();
}

Status Limits(const Json& sec, SandboxLimits* l) {
  if (!sec.is_object()) return sec.is_null() ? Status::Ok() : Bad("limits must be a map");
  Status s = Number(sec, "timeout_ms", &l->timeout_ms, 1, 3.6e6);
  if (s.ok()) s = Number(sec, "cpu_seconds", &l->cpu_seconds, 1, 3600);
  if (s.ok()) s = Number(sec, "memory_mb", &l->memory_mb, 16, 1 << 20);
  if (s.ok()) s = Number(sec, "file_size_mb", &l->file_size_mb, 0, 1 << 20);
  if (s.ok()) s = Number(sec, "open_files", &l->open_files, 8, 65536);
  if (s.ok()) s = Number(sec, "processes", &l->processes, 1, 65536);
  if (s.ok()) s = Number(sec, "max_output_bytes", &l->max_output_bytes, 1, 64 << 20);
  return s;
}

Status StringMap(const Json& j, const std::string& what,
                 std::vector<std::pair<std::string, std::string>>* out) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return Bad(what + " must be a map of strings");
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string() || k.empty()) return Bad(what + "." + k + " must be a string");
    out->emplace_back(k, v.get<std::string>());
  }
  return Status::Ok();
}

Status McpServers(const Json& sec, std::vector<McpServerSpec>* out) {
  if (sec.is_null()) return Status::Ok();
  if (!sec.is_object()) return Bad("mcp_servers must be a map of server name to server");
  for (const auto& [name, j] : sec.items()) {
    const std::string at = "mcp_servers." + name;
    if (name.empty() || name.size() > 64 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos) {
      return Bad(at + ": a server name is 1-64 of a-z, 0-9, _ and -");
    }
    if (name == kKaizenBuiltinServer) {
      return Bad(at + ": kaizen_builtin is reserved: mcp__kaizen_builtin__X names tollgate's built-in X");
    }
    if (!j.is_object()) return Bad(at + " must be a map");
    for (const auto& [k, v] : j.items()) {
      static const std::set<std::string> kKeys{"command", "env",        "read_only", "network",    "url",
                                               "headers", "timeout_ms", "limits",    "description"};
      if (!kKeys.count(k)) return Bad(at + ": unknown key " + k);
    }
    McpServerSpec m;
    m.name = name;
    // No address-space limit by default: V8 reserves 10 GiB of it for each
    // WebAssembly memory (node's own HTTP parser is one), which no
    // RLIMIT_AS a server could live under would allow.
    m.limits.memory_mb = 0;
    m.limits.cpu_seconds = 3600;
    m.limits.open_files = 1024;  // a node server opens each module it loads
    m.limits.processes = 256;    // counts threads: V8 and libuv start a dozen
    Status s = Strings(j, "command", &m.command);
    if (s.ok()) s = Strings(j, "read_only", &m.read_only);
    if (s.ok()) s = StringMap(j.value("env", Json()), at + ".env", &m.env);
    if (s.ok()) s = StringMap(j.value("headers", Json()), at + ".headers", &m.headers);
    if (s.ok()) s = Number(j, "timeout_ms", &m.call_timeout_ms, 1, 3.6e6);
    if (s.ok()) s = Limits(j.value("limits", Json()), &m.limits);
    if (!s.ok()) return Bad(at + "." + s.message().substr(std::string("policy: execute: ").size()));
    if (j.contains("url")) {
      if (!j["url"].is_string()) return Bad(at + ".url must be a string");
      m.url = j["url"];
    }
    if (j.contains("network")) {
      if (!j["network"].is_boolean()) return Bad(at + ".network must be true or false");
      m.network = j["network"];
    }
    if (m.command.empty() == m.url.empty())
      return Bad(at + ": give either command (stdio) or url (Streamable HTTP)");
    for (const auto& p : m.read_only) {
      if (p.empty() || p[0] != '/') return Bad(at + ".read_only: not an absolute path: " + p);
    }
    out->push_back(std::move(m));
  }
  std::sort(out->begin(), out->end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return Status::Ok();
}

}  // namespace

Json ExecutePolicy::AgentHttp(const std::string& org_id, const std::string& agent_id) const {
  Json merged = http_defaults.is_object() ? http_defaults : Json::object();
  auto o = orgs.find(org_id);
  if (o == orgs.end() || !o->is_object()) return merged;
  auto agents = o->find("agents");
  if (agents == o->end() || !agents->is_object()) return merged;
  auto a = agents->find(agent_id);
  if (a == agents->end() || !a->is_object()) return merged;
  auto h = a->find("http_request");
  if (h == a->end() || !h->is_object()) return merged;
  for (const auto& [k, v] : h->items()) {
    // Aliases add to the top level's by name; every other key replaces.
    if (k == "aliases" && v.is_object() && merged.contains("aliases") && merged["aliases"].is_object()) {
      for (const auto& [name, spec] : v.items()) merged["aliases"][name] = spec;
    } else {
      merged[k] = v;
    }
  }
  return merged;
}

ExecutePolicy DefaultExecutePolicy(const std::string& data_dir) {
  ExecutePolicy p;
  p.workspace_root = data_dir + "/workspaces";
  p.tools_dir = data_dir + "/tools";
  p.run_dir = data_dir + "/run";
  p.mcp_dir = data_dir + "/mcp";
  // Read-only, well-behaved utilities. Anything that can run another program
  // (find -exec, xargs, env, awk, sed's e command) stays out.
  p.command_allowlist = {"ls",    "cat",    "head",     "tail",    "wc",        "grep",   "sort",  "uniq",
                         "cut",   "tr",     "echo",     "date",    "pwd",       "true",   "false", "stat",
                         "du",    "df",     "basename", "dirname", "sha256sum", "md5sum", "diff",  "file",
                         "uname", "whoami", "id",       "sleep",   "seq"};
  p.interpreter_blocklist = {
      "sh",      "bash",    "dash",      "zsh",     "ksh",        "csh",    "tcsh",     "fish",
      "python",  "python2", "python3",   "perl",    "ruby",       "node",   "nodejs",   "deno",
      "bun",     "php",     "lua",       "tclsh",   "wish",       "awk",    "gawk",     "mawk",
      "nawk",    "sed",     "env",       "xargs",   "nohup",      "nice",   "timeout",  "setsid",
      "sudo",    "su",      "doas",      "busybox", "chroot",     "strace", "gdb",      "ssh",
      "script",  "expect",  "osascript", "pwsh",    "powershell", "java",   "jshell",   "R",
      "Rscript", "julia",   "erl",       "escript", "guile",      "racket", "ocaml",    "ghci",
      "irb",     "find",    "nsenter",   "unshare", "flock",      "watch",  "parallel", "make"};
  p.cli_limits.timeout_ms = 30000;
  return p;
}

// What `n` expands to (aliases included), counted before anything is
// copied, stopping at the first cap passed: a few kilobytes of aliases can
// stand for gigabytes. The caps are decide's (decide/policy_loader.cpp).
static bool YamlExpansionWithin(const YAML::Node& n, int depth, size_t* values, size_t* bytes) {
  constexpr size_t kMaxValues = 200'000, kMaxBytes = 8 << 20;
  if (depth > 64 || ++*values > kMaxValues) return false;
  if (n.IsScalar()) *bytes += n.Scalar().size();
  if ((*bytes += 16) > kMaxBytes) return false;
  if (n.IsSequence()) {
    for (const auto& x : n) {
      if (!YamlExpansionWithin(x, depth + 1, values, bytes)) return false;
    }
  } else if (n.IsMap()) {
    for (const auto& kv : n) {
      if (!YamlExpansionWithin(kv.first, depth + 1, values, bytes) ||
          !YamlExpansionWithin(kv.second, depth + 1, values, bytes)) {
        return false;
      }
    }
  }
  return true;
}

Status YamlToJson(const std::string& text, Json* out) {
  try {
    YAML::Node root = YAML::Load(text);
    size_t values = 0, bytes = 0;
    if (!YamlExpansionWithin(root, 0, &values, &bytes)) {
      return Status::Error(
          errc::kInvalidArgs,
          "policy: the YAML nests deeper than 64 levels or expands to more than 200000 values or "
          "8 MiB (aliases expanding?)");
    }
    *out = NodeToJson(root);
  } catch (const std::exception& e) {
    return Status::Error(errc::kInvalidArgs, std::string("policy: not valid YAML: ") + e.what());
  }
  return Status::Ok();
}

// The settings of the AI Orchestrator seed's tools (config.h).
static Status SeedToolSettings(const Json& sec, ExecutePolicy* p) {
  Status s = Strings(sec, "llm_models", &p->llm_models);
  if (s.ok()) s = Strings(sec, "search_allowed_bases", &p->search_allowed_bases);
  if (s.ok()) s = Number(sec, "llm_models_timeout_ms", &p->llm_models_timeout_ms, 1, 600000);
  if (s.ok()) s = Limits(sec.value("qa_limits", Json()), &p->qa_limits);
  if (!s.ok()) return s;
  for (const auto& m : p->llm_models) {
    if (m.empty() || m.size() > 256) return Bad("llm_models: a model name is 1-256 characters");
  }
  if (sec.contains("llm_models_url") && !sec["llm_models_url"].is_null()) {
    NormalUrl u;
    std::string why;
    if (!sec["llm_models_url"].is_string() ||
        !NormalizeUrl(sec["llm_models_url"].get<std::string>(), "", &u, &why)) {
      return Bad("llm_models_url must be an http(s) URL");
    }
    p->llm_models_url = sec["llm_models_url"];
  }
  for (auto& b : p->search_allowed_bases) {
    if (b.empty() || b[0] != '/') return Bad("search_allowed_bases: not an absolute path: " + b);
    const std::string normal = std::filesystem::path(b).lexically_normal().string();
    b = normal.size() > 1 && normal.back() == '/' ? normal.substr(0, normal.size() - 1) : normal;
  }
  return Status::Ok();
}

// The settings of Duragent's web, session and memory tools (config.h).
static Status DuragentToolSettings(const Json& sec, ExecutePolicy* p) {
  auto section = [&](const char* name, std::initializer_list<const char*> keys, Json* out) -> Status {
    *out = sec.value(name, Json::object());
    if (out->is_null()) *out = Json::object();
    if (!out->is_object()) return Bad(std::string(name) + " must be a map");
    for (const auto& [k, v] : out->items()) {
      bool known = false;
      for (const char* key : keys) known = known || k == key;
      if (!known) return Bad(std::string(name) + ": unknown key " + k);
    }
    return Status::Ok();
  };
  auto url = [](const Json& j, const char* key, const std::string& at, std::string* out) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::Ok();
    NormalUrl u;
    std::string why;
    if (!j[key].is_string() || !NormalizeUrl(j[key].get<std::string>(), "", &u, &why)) {
      return Bad(at + " must be an http(s) URL");
    }
    *out = j[key];
    return Status::Ok();
  };
  auto str = [](const Json& j, const char* key, const std::string& at, std::string* out) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::Ok();
    if (!j[key].is_string()) return Bad(at + " must be a string");
    *out = j[key];
    return Status::Ok();
  };
  Json web, session, memory;
  Status s = section("web", {"search_url", "api_key", "timeout_ms"}, &web);
  if (s.ok()) s = section("session", {"scope"}, &session);
  if (s.ok()) s = section("memory", {"llm"}, &memory);
  if (s.ok()) s = url(web, "search_url", "web.search_url", &p->web_search_url);
  if (s.ok()) s = str(web, "api_key", "web.api_key", &p->web_api_key);
  if (s.ok()) s = Number(web, "timeout_ms", &p->web_timeout_ms, 1, 120000);
  if (s.ok()) s = str(session, "scope", "session.scope", &p->session_scope);
  if (!s.ok()) return s;
  if (p->session_scope != "agent" && p->session_scope != "org")
    return Bad("session.scope must be agent or org");
  Json llm = memory.value("llm", Json::object());
  if (llm.is_null()) return Status::Ok();
  if (!llm.is_object()) return Bad("memory.llm must be a map");
  for (const auto& [k, v] : llm.items()) {
    if (k != "url" && k != "model" && k != "api_key" && k != "timeout_ms")
      return Bad("memory.llm: unknown key " + k);
  }
  s = url(llm, "url", "memory.llm.url", &p->memory_llm_url);
  if (s.ok()) s = str(llm, "model", "memory.llm.model", &p->memory_llm_model);
  if (s.ok()) s = str(llm, "api_key", "memory.llm.api_key", &p->memory_llm_api_key);
  if (s.ok()) s = Number(llm, "timeout_ms", &p->memory_llm_timeout_ms, 1, 600000);
  if (!s.ok()) return s;
  if (!p->memory_llm_url.empty() && p->memory_llm_model.empty())
    return Bad("memory.llm.model is required with url");
  return Status::Ok();
}

namespace {
// declared_tools: {agent: {tool: {command, description?, readme?}}}, the
// agent.yaml declarations as decide's loader translated them (absolute
// paths inside the Duragent directory).
Status DeclaredTools(const Json& j,
                     std::map<std::string, std::map<std::string, ExecutePolicy::DeclaredTool>>* out) {
  if (!j.is_object()) return Bad("declared_tools must be a map");
  for (const auto& [agent, tools] : j.items()) {
    if (!tools.is_object()) return Bad("declared_tools." + agent + " must be a map");
    for (const auto& [name, t] : tools.items()) {
      if (!t.is_object() || !t.contains("command") || !t["command"].is_string() ||
          t["command"].get<std::string>().empty() || t["command"].get<std::string>()[0] != '/') {
        return Bad("declared_tools." + agent + "." + name + ".command must be an absolute path");
      }
      ExecutePolicy::DeclaredTool d;
      d.command = t["command"];
      d.description = t.value("description", "");
      d.readme = t.value("readme", "");
      (*out)[agent][name] = std::move(d);
    }
  }
  return Status::Ok();
}
}  // namespace

Status ExecutePolicyFromJson(const Json& policy, const std::string& data_dir, ExecutePolicy* out) {
  ExecutePolicy p = DefaultExecutePolicy(data_dir);
  if (!policy.is_null() && !policy.is_object()) return Bad("the policy must be a map");
  if (policy.is_object()) {
    // A top-level `agents` entry is refused by decide's loader and never
    // read here (it would bind an agent id in every org).
    auto orgs = policy.find("orgs");
    if (orgs != policy.end() && orgs->is_object()) p.orgs = *orgs;
    auto http = policy.find("http_request");
    if (http != policy.end() && http->is_object()) p.http_defaults = *http;
    auto it = policy.find("execute");
    const Json sec = it != policy.end() && it->is_object() ? *it : Json::object();
    if (it != policy.end() && !it->is_object() && !it->is_null()) return Bad("must be a map");
    if (sec.contains("workspace_root")) {
      if (!sec["workspace_root"].is_string() || sec["workspace_root"].get<std::string>().empty())
        return Bad("workspace_root must be a path");
      p.workspace_root = sec["workspace_root"];
    }
    if (sec.contains("tools_dir")) {
      if (!sec["tools_dir"].is_string()) return Bad("tools_dir must be a path");
      p.tools_dir = sec["tools_dir"];
    }
    if (sec.contains("agents_dir")) {
      if (!sec["agents_dir"].is_string()) return Bad("agents_dir must be a path");
      p.agents_dir = sec["agents_dir"];
    }
    if (Status d = DeclaredTools(sec.value("declared_tools", Json::object()), &p.declared_tools); !d.ok())
      return d;
    if (sec.contains("writes_enabled")) {
      if (!sec["writes_enabled"].is_boolean()) return Bad("writes_enabled must be true or false");
      p.writes_enabled = sec["writes_enabled"];
    }
    Status s = Number(sec, "max_read_bytes", &p.max_read_bytes, 1, 1 << 30);
    if (s.ok()) s = Number(sec, "max_write_bytes", &p.max_write_bytes, 1, 1 << 30);
    if (s.ok()) s = Number(sec, "max_list_entries", &p.max_list_entries, 1, 1e6);
    if (s.ok()) s = Number(sec, "max_search_results", &p.max_search_results, 1, 1e6);
    if (s.ok()) s = Number(sec, "max_search_depth", &p.max_search_depth, 1, 256);
    if (!s.ok()) return s;
    const Json cmd = sec.value("commands", Json::object());
    if (!cmd.is_object()) return Bad("commands must be a map");
    s = Strings(cmd, "allow", &p.command_allowlist);
    if (s.ok()) s = Strings(cmd, "block", &p.interpreter_blocklist);
    if (s.ok()) s = Strings(cmd, "admin_agents", &p.admin_agents);
    if (s.ok()) s = Strings(cmd, "admin_allow", &p.admin_allowlist);
    if (s.ok()) s = Limits(cmd.value("limits", Json()), &p.limits);
    if (s.ok()) s = Limits(sec.value("cli_limits", Json()), &p.cli_limits);
    if (s.ok()) {
      const Json bg = sec.value("background", Json::object());
      if (!bg.is_object()) return Bad("background must be a map");
      s = Number(bg, "max_per_agent", &p.background.max_per_agent, 1, 64);
      if (s.ok()) s = Number(bg, "output_bytes", &p.background.output_bytes, 4096, 64 << 20);
      if (s.ok()) s = Number(bg, "max_lifetime_s", &p.background.max_lifetime_s, 1, 7 * 86400);
      if (s.ok()) s = Number(bg, "pids", &p.background.pids, 1, 65536);
      if (s.ok()) s = Number(bg, "memory_mb", &p.background.memory_mb, 16, 1 << 20);
    }
    if (!s.ok()) return s;
    if (cmd.contains("run_as")) {
      if (!cmd["run_as"].is_string()) return Bad("commands.run_as must be a user name or \"\"");
      p.run_as = cmd["run_as"];
    }
    const Json net = sec.value("network", Json::object());
    std::vector<std::string> cidrs;
    s = Strings(net.is_object() ? net : Json::object(), "allow_cidrs", &cidrs);
    if (!s.ok()) return s;
    for (const auto& c : cidrs) {
      Cidr cidr;
      if (!ParseCidr(c, &cidr)) return Bad("network.allow_cidrs: not a CIDR: " + c);
      p.allow_cidrs.push_back(cidr);
    }
    if (net.is_object()) {
      s = Number(net, "max_redirects", &p.max_redirects, 0, 20);
      if (!s.ok()) return s;
    }
    s = McpServers(sec.value("mcp_servers", Json()), &p.mcp_servers);
    if (!s.ok()) return s;
    s = SeedToolSettings(sec, &p);
    if (!s.ok()) return s;
    s = DuragentToolSettings(sec, &p);
    if (!s.ok()) return s;
  }
  // Relative paths are taken from where tollgate started, once: a CLI tool
  // runs from its workspace, where the same relative path means something
  // else ("cannot exec ... No such file" under `up --data data1`).
  for (std::string* d : {&p.workspace_root, &p.tools_dir, &p.agents_dir, &p.run_dir, &p.mcp_dir}) {
    std::error_code ec;
    if (!d->empty()) *d = std::filesystem::absolute(*d, ec).lexically_normal().string();
  }
  *out = std::move(p);
  return Status::Ok();
}

Status LoadExecutePolicy(const std::string& path, const std::string& data_dir, ExecutePolicy* out) {
  if (path.empty()) return ExecutePolicyFromJson(Json(), data_dir, out);
  std::ifstream in(path);
  if (!in) return Status::Error(errc::kNotFound, "policy: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  Json j;
  Status s = YamlToJson(ss.str(), &j);
  if (!s.ok()) return s;
  return ExecutePolicyFromJson(j, data_dir, out);
}

}  // namespace tollgate
