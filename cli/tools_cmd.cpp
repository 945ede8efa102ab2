// `tollgate tools list`: the tools an agent may call under the policy in
// force, as the running deployment's API answers GET /v1/tools (the same
// answer MCP's tools/list gives; docs/mcp.md).
#include <unistd.h>

#include <iomanip>
#include <iostream>

#include "cli/admin_client.h"
#include "cli/commands.h"

namespace tollgate::cli {
namespace {

struct ToolsFlags {
  std::string data = kDefaultDataDir, token_file, org = "default", agent;
  std::string category, keyword, format;  // discovery (core/tool_discovery.h)
  bool json = false, safe_only = false;
};

int RunToolsList(const ToolsFlags& f) {
  const std::string url = LiveApiUrl(f.data);
  std::string token;
  if (url.empty()) {
    std::cerr << "tollgate: no running API in " << f.data << " (start `tollgate up --data " << f.data
              << "`)\n";
    return 2;
  }
  if (Status s = ResolveToken({f.data, f.token_file}, &token); !s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 2;
  }
  int status = 0;
  Json reply;
  Status s =
      ApiCall(url, token, "GET",
              "/v1/tools?org=" + EncodeQueryParam(f.org) + "&agent=" + EncodeQueryParam(f.agent) +
                  "&category=" + EncodeQueryParam(f.category) + "&keyword=" + EncodeQueryParam(f.keyword) +
                  "&format=" + EncodeQueryParam(f.format) + (f.safe_only ? "&safe_only=true" : ""),
              "", &status, &reply);
  if (!s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 1;
  }
  if (status != 200) {
    std::cerr << "tollgate: " << reply.value("error", Json::object()).dump() << "\n";
    return 1;
  }
  if (f.json || !f.format.empty() || !isatty(STDOUT_FILENO)) {
    std::cout << reply.dump(2) << std::endl;
    return 0;
  }
  std::cout << "tools agent '" << f.agent << "' of org '" << f.org << "' may call (policy "
            << reply.value("policy_version", "") << "):\n";
  std::cout << std::left << std::setw(28) << "NAME" << std::setw(10) << "DANGER" << std::setw(10) << "READS"
            << std::setw(6) << "ASKS"
            << "DESCRIPTION\n";
  for (const Json& t : reply.value("tools", Json::array())) {
    std::string desc = t.value("description", "");
    if (desc.size() > 60) desc = desc.substr(0, 57) + "...";
    std::cout << std::setw(28) << t.value("name", "") << std::setw(10) << t.value("danger", "")
              << std::setw(10) << (t.value("read_only", false) ? "only" : "mutates") << std::setw(6)
              << (t.value("asks", false) ? "yes" : (t.value("depends_on_arguments", false) ? "maybe" : "no"))
              << desc << "\n";
  }
  return 0;
}

}  // namespace

void AddToolsCommands(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ToolsFlags>();
  auto* tools = app.add_subcommand("tools", "the tools an agent may call");
  tools->require_subcommand(1);
  auto* list =
      tools->add_subcommand("list", "the tools an agent may call, with schema, danger and whether it asks");
  list->add_option("--data", f->data, "data directory of `tollgate up`")->capture_default_str();
  list->add_option("--org", f->org, "the agent's org")->capture_default_str();
  list->add_option("--agent", f->agent, "the agent")->required();
  list->add_option("--token-file", f->token_file,
                   "API token (default $TOLLGATE_TOKEN, else DATA/admin.token)");
  list->add_flag("--json", f->json, "the API's JSON (the default when stdout is not a terminal)");
  list->add_option("--category", f->category,
                   "only tools of this category (filesystem, network, system, qa, ...)");
  list->add_flag("--safe-only", f->safe_only, "only tools of danger SAFE");
  list->add_option("--keyword", f->keyword, "only tools whose name or description holds this (any case)");
  list->add_option("--format", f->format,
                   "the tools as mcp, openai (function calling) or anthropic (tool use) JSON")
      ->check(CLI::IsMember({"mcp", "openai", "anthropic"}));
  list->callback([f, exit_code] { *exit_code = RunToolsList(*f); });
}

}  // namespace tollgate::cli
