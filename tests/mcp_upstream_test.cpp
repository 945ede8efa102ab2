// Upstream MCP servers (docs/mcp.md): the policy's execute.mcp_servers as
// execute reads it, decide's view of mcp:SERVER/TOOL, the MCP clients'
// spelling of tool globs, and a server that cannot stay up failing closed.
// The end-to-end cases with real servers are tests/mcp/upstream.test.mjs.
#include "execute/mcp_upstream.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/invocation.h"
#include "decide/tool_access.h"
#include "execute/config.h"
#include "execute/tool.h"
#include "test_util.h"

namespace tollgate {
namespace {

constexpr int64_t kNow = 1'790'000'000'000'000;

Status Parse(const std::string& yaml, ExecutePolicy* out) {
  Json j;
  Status s = YamlToJson(yaml, &j);
  return s.ok() ? ExecutePolicyFromJson(j, "/tmp/tollgate-data", out) : s;
}

TEST(McpServersConfig, AStdioAndAnHttpServerAreReadWithTheirDefaults) {
  ExecutePolicy p;
  ASSERT_TRUE(
      Parse("execute:\n  mcp_servers:\n"
            "    zeta: {url: 'http://127.0.0.1:9/mcp', headers: {Authorization: 'Bearer ${env:T}'}}\n"
            "    alpha: {command: [node, /srv/a.js], env: {K: v}, read_only: [/srv], timeout_ms: 500}\n",
            &p)
          .ok());
  ASSERT_EQ(p.mcp_servers.size(), 2u);
  const McpServerSpec& a = p.mcp_servers[0];  // sorted by name
  EXPECT_EQ(a.name, "alpha");
  EXPECT_EQ(a.command, (std::vector<std::string>{"node", "/srv/a.js"}));
  EXPECT_EQ(a.call_timeout_ms, 500);
  EXPECT_EQ(a.limits.memory_mb, 0u);  // V8's reservations: docs/mcp.md
  EXPECT_EQ(a.limits.open_files, 1024);
  EXPECT_FALSE(a.network);
  EXPECT_EQ(p.mcp_servers[1].url, "http://127.0.0.1:9/mcp");
  EXPECT_EQ(p.mcp_servers[1].headers[0].second, "Bearer ${env:T}");  // expanded only when sent
  EXPECT_EQ(p.mcp_dir, "/tmp/tollgate-data/mcp");
}

TEST(McpServersConfig, AMalformedServerIsRefusedSayingWhich) {
  ExecutePolicy p;
  for (const char* bad :
       {"    x: {}\n", "    x: {command: [a], url: 'http://h/'}\n", "    Bad/Name: {command: [a]}\n",
        "    x: {command: [a], shell: true}\n", "    x: {command: [a], read_only: [rel]}\n",
        "    x: {command: a}\n", "    x: {url: 'http://h/', headers: {A: 1}}\n"}) {
    Status s = Parse(std::string("execute:\n  mcp_servers:\n") + bad, &p);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("mcp_servers."), std::string::npos) << s.message();
  }
}

TEST(ExecutePaths, ARelativeDataDirectoryBecomesAbsoluteSoToolsRunFromTheirWorkspace) {
  ExecutePolicy p;
  ASSERT_TRUE(ExecutePolicyFromJson(Json(), "data1", &p).ok());
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(p.tools_dir, cwd + "/data1/tools");
  EXPECT_EQ(p.workspace_root, cwd + "/data1/workspaces");
  EXPECT_EQ(p.mcp_dir, cwd + "/data1/mcp");
}

TEST(McpToolNames, TheClientsSpellingOfAToolGlobIsOurs) {
  EXPECT_EQ(McpToolPattern("mcp__github__create_issue"), "mcp:github/create_issue");
  EXPECT_EQ(McpToolPattern("mcp__github__*"), "mcp:github/*");
  EXPECT_EQ(McpToolPattern("mcp__github"), "mcp:github/*");
  EXPECT_EQ(McpToolPattern("mcp__*"), "mcp:*");
  EXPECT_EQ(McpToolPattern("mcp:github/x"), "mcp:github/x");
  EXPECT_EQ(McpToolPattern("echo"), "echo");
  EXPECT_EQ(BuildInvocation("mcp:github/x", Json::object(), ""), "mcp:github/x");
}

PolicyInForce Policy(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  PolicyInForce pif;
  pif.SetFile(p);
  return pif;
}

TEST(McpToolsAtDecide, ADeclaredServersToolIsHighAndMutatingAndAnUndeclaredOnesIsUnknown) {
  const PolicyInForce pif = Policy("mode: ask\nexecute:\n  mcp_servers:\n    gh: {command: [node, /x.js]}\n");
  ToolAccess a = AccessOf(pif, "default", "a", "mcp:gh/create_issue", kNow);
  EXPECT_TRUE(a.callable);
  EXPECT_TRUE(a.asks);
  EXPECT_EQ(a.danger, DangerLevel::kHigh);
  EXPECT_FALSE(a.read_only);
  EXPECT_FALSE(AccessOf(pif, "default", "a", "mcp:other/create_issue", kNow).callable);
  EXPECT_FALSE(AccessOf(pif, "default", "a", "mcp:gh", kNow).callable);
}

TEST(McpToolsAtDecide, ToolsEntriesAndDenyGlobsInEitherSpellingApply) {
  const PolicyInForce pif = Policy(
      "mode: ask\nexecute:\n  mcp_servers:\n    gh: {command: [node, /x.js]}\n"
      "tools:\n  mcp__gh__search: {danger: LOW, read_only: true}\n"
      "deny: [mcp__gh__delete_repo]\n");
  ToolAccess s = AccessOf(pif, "default", "a", "mcp:gh/search", kNow);
  EXPECT_TRUE(s.callable);
  EXPECT_FALSE(s.asks);
  EXPECT_TRUE(s.read_only);
  EXPECT_FALSE(AccessOf(pif, "default", "a", "mcp:gh/delete_repo", kNow).callable);
}

TEST(McpUpstreamsRuntime, AServerThatExitsAtOnceFailsItsCallsClosedSayingWhy) {
  testing::TempDir dir;
  ExecutePolicy p = DefaultExecutePolicy(dir.path());
  McpServerSpec s;
  s.name = "broken";
  s.command = {"false"};
  p.mcp_servers = {s};
  McpUpstreams ups;
  ups.Configure(p);
  ASSERT_TRUE(ups.WaitSettled(std::chrono::seconds(20)));
  Json r = ups.Call("broken", "anything", Json::object());
  EXPECT_FALSE(r["success"].get<bool>());
  EXPECT_EQ(r["error"]["code"], errc::kUpstreamUnavailable);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("exited"), std::string::npos) << r.dump();
  Json none = ups.Call("nobody", "x", Json::object());
  EXPECT_EQ(none["error"]["code"], errc::kUpstreamUnavailable);
  // A policy without it stops it.
  ups.Configure(DefaultExecutePolicy(dir.path()));
  EXPECT_FALSE(ups.Has("broken"));
}

}  // namespace
}  // namespace tollgate
