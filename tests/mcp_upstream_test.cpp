// Upstream MCP servers (docs/mcp.md): the policy's execute.mcp_servers as
// execute reads it, decide's view of mcp:SERVER/TOOL, the MCP clients'
// spelling of tool globs, a server that cannot stay up failing closed, and
// the era rules (the probe's answers the SDKs give, the envelope, the
// Streamable HTTP headers, which 2026-07-28 results are taken).
// The end-to-end cases with real servers are tests/mcp/upstream.test.mjs.
#include "execute/mcp_upstream.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/invocation.h"
#include "decide/tool_access.h"
#include "execute/config.h"
#include "execute/mcp_upstream_internal.h"
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

// The answers to server/discover the SDKs give (captured, docs/mcp.md).
TEST(McpEras, TheProbeIsModernOnlyWhenTheAnswerNames20260728) {
  auto era = [](const char* text) { return McpProbeEra(Json::parse(text)); };
  // SDK v2, either transport.
  EXPECT_EQ(era(R"({"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{},)"
                R"("resultType":"complete","ttlMs":0,"cacheScope":"private"}})"),
            McpEra::kModern);
  // A server that understood the probe and names the revision it takes.
  EXPECT_EQ(era(R"({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version",)"
                R"("data":{"supported":["2026-07-28"],"requested":"2099-01-01"}}})"),
            McpEra::kModern);
  for (
      const char* legacy :
      {// SDK v1 over stdio.
       R"({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}})",
       // SDK v1 over HTTP (400), refusing the MCP-Protocol-Version header.
       R"({"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Unsupported protocol version"},"id":null})",
       // -32022 naming only legacy revisions, or no data.
       R"({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25"]}}})",
       R"({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}})",
       // A result of another shape (a server answering anything with one).
       R"({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"fine"}]}})",
       R"({"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2099-01-01"]}})",
       R"({"jsonrpc":"2.0","id":1,"result":{"supportedVersions":"2026-07-28"}})",
       // No answer (the stdio probe's deadline), not JSON-RPC at all.
       R"({"x-probe":"no answer"})", R"(null)", R"([1,2])"}) {
    EXPECT_EQ(era(legacy), McpEra::kLegacy) << legacy;
  }
}

TEST(McpEras, TheEnvelopeIsTollgatesOwnAndKeepsWhatTheRequestCarried) {
  const Json p = McpWithEnvelope(
      {{"name", "echo"},
       {"_meta", {{"progressToken", 7}, {"io.modelcontextprotocol/protocolVersion", "2025-06-18"}}}});
  const Json& m = p["_meta"];
  EXPECT_EQ(p["name"], "echo");
  EXPECT_EQ(m["progressToken"], 7);
  EXPECT_EQ(m["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
  EXPECT_EQ(m["io.modelcontextprotocol/clientCapabilities"], Json::object());
  EXPECT_EQ(m["io.modelcontextprotocol/clientInfo"]["name"], "tollgate");
  EXPECT_EQ(McpDiscoverParams(), McpWithEnvelope(Json::object()));
  EXPECT_TRUE(McpWithEnvelope(Json()).contains("_meta"));
}

TEST(McpEras, HeaderValuesThatAreNotPlainAreBase64Encoded) {
  EXPECT_EQ(McpHeaderValue("echo"), "echo");
  EXPECT_EQ(McpHeaderValue("get_issue.v2"), "get_issue.v2");
  EXPECT_EQ(McpHeaderValue("\xc3\xa9"
                           "cho"),
            "=?base64?w6ljaG8=?=");                                            // UTF-8
  EXPECT_EQ(McpHeaderValue(" lead"), "=?base64?IGxlYWQ=?=");                   // a receiver strips it
  EXPECT_EQ(McpHeaderValue("a\r\nX-Evil: 1"), "=?base64?YQ0KWC1FdmlsOiAx?=");  // no header of its own
  EXPECT_EQ(McpHeaderValue("=?base64?ZWNobw==?="), "=?base64?PT9iYXNlNjQ/WldOb2J3PT0/PQ==?=");
  EXPECT_EQ(McpHeaderValue(""),
            "=?base64?"
            "?=");  // two literals: no trigraph

  using H = std::vector<std::string>;
  EXPECT_EQ(McpModernHeaders("tools/call", {{"name", "echo"}, {"arguments", Json::object()}}),
            (H{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: echo"}));
  EXPECT_EQ(McpModernHeaders("tools/list", Json::object()),
            (H{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/list"}));
  EXPECT_EQ(McpModernHeaders("resources/read", {{"uri", "file:///a b"}}).back(), "Mcp-Name: file:///a b");
}

TEST(McpEras, OnlyACompleteResultIsTaken) {
  EXPECT_TRUE(
      McpModernResult("s", "tools/call", {{"resultType", "complete"}, {"content", Json::array()}}).ok());
  const Status ask = McpModernResult("s", "tools/call", {{"resultType", "input_required"}});
  EXPECT_EQ(ask.code(), errc::kUpstreamProtocol);
  EXPECT_NE(ask.message().find("input_required"), std::string::npos) << ask.message();
  EXPECT_NE(ask.message().find("'s'"), std::string::npos) << ask.message();
  EXPECT_EQ(McpModernResult("s", "tools/call", {{"resultType", "task"}}).code(), errc::kUpstreamProtocol);
  EXPECT_EQ(McpModernResult("s", "tools/list", {{"tools", Json::array()}}).code(), errc::kUpstreamProtocol);
  EXPECT_EQ(McpModernResult("s", "tools/list", {{"resultType", 1}}).code(), errc::kUpstreamProtocol);
  EXPECT_EQ(McpModernResult("s", "tools/list", Json::array()).code(), errc::kUpstreamProtocol);
}

TEST(McpEras, ALegacyServersRevisionIsKeptOnlyWhenPlain) {
  EXPECT_EQ(McpLegacyVersion({{"protocolVersion", "2025-11-25"}}), "2025-11-25");
  EXPECT_EQ(McpLegacyVersion({{"protocolVersion", "2025-11-25\r\nX: y"}}), kMcpClientVersion);
  EXPECT_EQ(McpLegacyVersion(Json::object()), kMcpClientVersion);
}

}  // namespace
}  // namespace tollgate
