#include "execute/registry.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/tool_kind.h"
#include "execute/tools/cli_tool.h"
#include "execute/tools/mcp_tool.h"
#include "execute/tools/tools.h"

namespace tollgate {

namespace {
const ToolFacts& CatalogRow(std::string_view name) {
  const ToolFacts* facts = FindBuiltinTool(name);
  if (facts == nullptr) {
    std::fprintf(stderr, "tool '%.*s' is not in the tool catalog (core/tool_catalog.cpp)\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return *facts;
}
}  // namespace

BuiltinTool::BuiltinTool(std::string_view name) : facts_(CatalogRow(name)) {}

bool BuiltinTool::ReadOnly(const Json& args, const Json& decision) const {
  if (facts_.reads != Reads::kByAction) return facts_.read_only();
  // Both must say so: the action's row and decide's answer for this call.
  const auto d = decision.is_object() ? decision.find("read_only") : decision.end();
  const bool decided = decision.is_object() && d != decision.end() && d->is_boolean() && d->get<bool>();
  return decided && args.is_object() && args.contains("action") && args["action"].is_string() &&
         facts_.read_only(args["action"].get<std::string>());
}

void ToolRegistry::RegisterBuiltins() {
  // The one list of built-ins. A new tool: its row in core/tool_catalog.cpp,
  // a file in tools/, a factory in tools/tools.h, a line here, its tests,
  // and its entry in docs/tools.md.
  Register(MakeEcho());
  Register(MakeCurrentTime());
  Register(MakeCalculate());
  Register(MakeReadFile());
  Register(MakeWriteFile());
  Register(MakeListDirectory());
  Register(MakeFileExists());
  Register(MakeDeleteFile());
  Register(MakeSearchFiles());
  Register(MakeHttpRequest());
  Register(MakeExecuteCommand());
  Register(MakeGetAuditLog());
  Register(MakeGetSystemInfo());
  Register(MakeGetDatetime());
  Register(MakeListLlmModels());
  Register(MakeSearchDirectory());
  Register(MakeGitStatus());
  Register(MakeGitDiff());
  Register(MakeRunTests());
  Register(MakeRunLint());
  Register(MakeRunFormat());
  Register(MakeRunBuild());
  Register(MakeRunTypecheck());
  for (const char* k : {"http_get", "http_post", "http_put", "http_delete", "fetch_url", "extract_links"}) {
    Register(MakeKaizenHttpTool(k));
  }
  Register(MakeBashCommand("bash_command"));
  Register(MakeBashCommand("bash"));
  Register(MakeReloadTools());
  Register(MakeWeb());
  Register(MakeSchedule());
  Register(MakeBackgroundProcess());
  Register(MakeSession());
  Register(MakeMemory());
}

void ToolRegistry::Register(std::unique_ptr<Tool> tool) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string name = tool->name();
  builtins_[name] = std::shared_ptr<const Tool>(std::move(tool));
}

std::vector<std::string> ToolRegistry::CliNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, tool] : cli_) out.push_back(IsCliTool(name) ? name.substr(4) : name);
  return out;
}

size_t ToolRegistry::Reload() {
  std::map<std::string, std::shared_ptr<const Tool>> found;
  if (!tools_dir_.empty()) {
    for (auto& t : DiscoverCliTools(tools_dir_)) {
      std::string name = t->name();
      found[name] = std::shared_ptr<const Tool>(std::move(t));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  cli_.swap(found);
  return cli_.size();
}

void ToolRegistry::SetUpstreams(std::shared_ptr<const McpUpstreams> upstreams) {
  std::lock_guard<std::mutex> lock(mu_);
  upstreams_ = std::move(upstreams);
}

std::shared_ptr<const McpUpstreams> ToolRegistry::upstreams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return upstreams_;
}

std::shared_ptr<const Tool> ToolRegistry::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsMcpTool(name)) return MakeMcpTool(upstreams_, name);
  auto it = builtins_.find(name);
  if (it != builtins_.end()) return it->second;
  it = cli_.find(name);
  return it != cli_.end() ? it->second : nullptr;
}

namespace {

// Whether the policy lists (org, agent) under orgs.<org>.agents: its
// agent.yaml and agent directory are that org's agent's alone.
bool ListedAgent(const ExecutePolicy& p, const std::string& org, const std::string& agent) {
  const auto o = p.orgs.find(org);
  if (o == p.orgs.end() || !o->is_object()) return false;
  const auto a = o->find("agents");
  return a != o->end() && a->is_object() && a->contains(agent);
}

// A real directory (not a symlink an agent planted).
bool RealDir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::symlink_status(path, ec).type() == std::filesystem::file_type::directory;
}

// The CLI tools of (org, agent) in precedence order, first of a name wins.
std::vector<CliToolFile> AgentCliFiles(const ExecutePolicy& p, const std::string& org,
                                       const std::string& agent) {
  std::vector<CliToolFile> out;
  if (ListedAgent(p, org, agent)) {
    if (auto d = p.declared_tools.find(agent); d != p.declared_tools.end()) {
      for (const auto& [name, t] : d->second)
        out.push_back(DeclaredToolFile(name, t.command, t.description, t.readme));
    }
    if (!p.agents_dir.empty() && !agent.empty() && agent.find('/') == std::string::npos && agent != "." &&
        agent != "..") {
      for (auto& f : ScanToolDir(p.agents_dir + "/" + agent + "/tools", CliSource::kAgent, false))
        out.push_back(std::move(f));
    }
  }
  if (!p.tools_dir.empty()) {
    for (auto& f : ScanToolDir(p.tools_dir, CliSource::kWorkspace, false)) out.push_back(std::move(f));
  }
  const std::string ws = p.workspace_root + "/" + org + "/" + agent;
  if (!p.workspace_root.empty() && RealDir(ws) && RealDir(ws + "/tools")) {
    for (auto& f : ScanToolDir(ws + "/tools", CliSource::kAgentWritten, true)) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::shared_ptr<const Tool> ToolRegistry::FindFor(const std::string& name, const std::string& org,
                                                  const std::string& agent,
                                                  const ExecutePolicy& policy) const {
  if (!IsCliTool(name)) return Find(name);
  for (CliToolFile& f : AgentCliFiles(policy, org, agent)) {
    if ("cli:" + f.name == name) return MakeCliTool(std::move(f));
  }
  return nullptr;
}

Json ToolRegistry::AgentTools(const std::string& org, const std::string& agent, const ExecutePolicy& policy,
                              std::vector<std::string>* shadowed) const {
  std::map<std::string, Json> seen;
  for (const CliToolFile& f : AgentCliFiles(policy, org, agent)) {
    const std::string name = "cli:" + f.name;
    if (seen.count(name)) {
      if (f.source == CliSource::kAgentWritten && shadowed != nullptr) shadowed->push_back(name);
      continue;
    }
    seen[name] = {{"name", name},
                  {"source", CliSourceName(f.source)},
                  {"description", FirstParagraph(f.readme)},
                  {"sha256", f.sha256}};
  }
  Json out = Json::array();
  for (auto& [n, j] : seen) out.push_back(std::move(j));
  return out;
}

std::vector<std::string> ToolRegistry::OperatorCliNames(const ExecutePolicy& policy) const {
  std::set<std::string> names;
  for (const std::string& n : CliNames()) names.insert(n);
  for (const auto& [agent, tools] : policy.declared_tools) {
    for (const auto& [n, t] : tools) names.insert(n);
  }
  std::error_code ec;
  if (!policy.agents_dir.empty()) {
    for (const auto& a : std::filesystem::directory_iterator(policy.agents_dir, ec)) {
      for (const auto& f : ScanToolDir(a.path().string() + "/tools", CliSource::kAgent, false))
        names.insert(f.name);
    }
  }
  return {names.begin(), names.end()};
}

Json ToolRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json out = Json::array();
  for (const auto* m : {&builtins_, &cli_}) {
    for (const auto& [name, t] : *m) {
      out.push_back(
          {{"name", name}, {"description", t->description()}, {"kind", m == &cli_ ? "cli" : "builtin"}});
    }
  }
  if (upstreams_) {
    for (const auto& [server, s] : upstreams_->Describe().items()) {
      for (const auto& t : s["tools"]) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
        out.push_back({{"name", "mcp:" + server + "/" + t["name"].get<std::string>()},
                       {"description", t.value("description", "")},
                       {"kind", "mcp"}});
      }
    }
  }
  return out;
}

}  // namespace tollgate
