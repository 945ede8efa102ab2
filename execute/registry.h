// ToolRegistry: every tool execute can run, by name. The built-ins are
// registered in one place (RegisterBuiltins, registry.cpp); CLI tools are
// discovered from a directory and re-discovered on Reload(), so a new tool
// dropped in is picked up without a restart. Thread-safe: Find() from
// workers while Reload() runs on the stage thread; a Tool found stays valid
// for as long as the caller holds its shared_ptr.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "execute/mcp_upstream.h"
#include "execute/tool.h"

namespace tollgate {

class ToolRegistry {
 public:
  explicit ToolRegistry(std::string tools_dir = "") : tools_dir_(std::move(tools_dir)) {}
  // echo, current_time, calculate, the file tools, http_request,
  // execute_command, get_audit_log, get_system_info, and the AI
  // Orchestrator seed's get_datetime, list_llm_models, search_directory
  // and QA tools.
  void RegisterBuiltins();
  void Register(std::unique_ptr<Tool> tool);
  // Rescans the tools dir; returns how many CLI tools are now known.
  size_t Reload();
  // The upstream MCP servers whose tools "mcp:<server>/<tool>" Find serves.
  void SetUpstreams(std::shared_ptr<const McpUpstreams> upstreams);
  std::shared_ptr<const McpUpstreams> upstreams() const;
  // Null when unknown. CLI tools: the tools dir's only (FindFor sees more).
  std::shared_ptr<const Tool> Find(const std::string& name) const;
  // `name` as agent (org, agent) sees it (docs/tools.md, "Tool
  // declarations"): a built-in or an upstream's as Find; a CLI tool by
  // Duragent's precedence: the agent's agent.yaml declarations
  // (policy.declared_tools), its directory (<agents_dir>/<agent>/tools),
  // the tools dir, then the agent's own workspace `tools/` (agent-written:
  // never shadowing the others). Declarations and the agent's directory
  // count only for an agent the policy lists under orgs.<org>.agents.
  std::shared_ptr<const Tool> FindFor(const std::string& name, const std::string& org,
                                      const std::string& agent, const ExecutePolicy& policy) const;
  // Every CLI tool agent (org, agent) sees now, by that precedence:
  // [{name: "cli:X", source, description, sha256}], sorted by name; an
  // agent-written tool an operator's shadows is left out and named in
  // *shadowed. What reload_tools returns and decide folds.
  Json AgentTools(const std::string& org, const std::string& agent, const ExecutePolicy& policy,
                  std::vector<std::string>* shadowed = nullptr) const;
  // The CLI tools' names (without "cli:"), sorted: the tools dir's.
  std::vector<std::string> CliNames() const;
  // Those and every declared tool and agent directory tool of `policy`
  // (what this executor announces in tools.available).
  std::vector<std::string> OperatorCliNames(const ExecutePolicy& policy) const;
  const std::string& tools_dir() const { return tools_dir_; }
  // [{"name", "description", "kind"}], sorted by name; then each upstream
  // server's tools as it last listed them (kind "mcp").
  Json List() const;

 private:
  const std::string tools_dir_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Tool>> builtins_;
  std::map<std::string, std::shared_ptr<const Tool>> cli_;
  std::shared_ptr<const McpUpstreams> upstreams_;
};

}  // namespace tollgate
