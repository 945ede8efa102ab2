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
  // Null when unknown.
  std::shared_ptr<const Tool> Find(const std::string& name) const;
  // The CLI tools' names (without "cli:"), sorted.
  std::vector<std::string> CliNames() const;
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
