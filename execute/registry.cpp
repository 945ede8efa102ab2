#include "execute/registry.h"

#include <cstdio>
#include <cstdlib>

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
  Register(MakeBashCommand());
}

void ToolRegistry::Register(std::unique_ptr<Tool> tool) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string name = tool->name();
  builtins_[name] = std::shared_ptr<const Tool>(std::move(tool));
}

std::vector<std::string> ToolRegistry::CliNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, tool] : cli_) out.push_back(name.rfind("cli:", 0) == 0 ? name.substr(4) : name);
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
  if (name.rfind("mcp:", 0) == 0) return MakeMcpTool(upstreams_, name);
  auto it = builtins_.find(name);
  if (it != builtins_.end()) return it->second;
  it = cli_.find(name);
  return it != cli_.end() ? it->second : nullptr;
}

Json ToolRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json out = Json::array();
  for (const auto* m : {&builtins_, &cli_}) {
    for (const auto& [name, t] : *m) {
      out.push_back({{"name", name}, {"description", t->description()}, {"kind", m == &cli_ ? "cli" : "builtin"}});
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
