// Duragent's runtime on the gate (issue 30; docs/tools.md "Duragent's
// tools", "Tool declarations"; docs/policy.md "Command lines"): a call's
// action is part of what a policy matches, `bash` lines are held command by
// command with pipe filters covered by their producer, tools are found by
// Duragent's conventions and precedence, and an agent that writes a tool,
// calls reload_tools and then calls it gets exactly the bytes it reloaded.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/invocation.h"
#include "core/shell_line.h"
#include "decide/policy_engine.h"
#include "execute/registry.h"
#include "execute/sandbox.h"
#include "execute/tools/cli_tool.h"
#include "tests/pipeline_fixture.h"

namespace tollgate {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int64_t kT0 = 1'795'000'000'000'000;

PolicyPtr MustLoad(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

// The decision on one request of agent a of org o1 under `yaml`.
Json DecideOne(const std::string& yaml, const std::string& tool, Json args, const std::string& action = "") {
  PolicyInForce pif;
  pif.SetFile(MustLoad(yaml));
  BudgetLedger ledger;
  Json req{{"request_id", "r1"}, {"org_id", "o1"}, {"agent_id", "a"},
           {"session_id", "s1"}, {"tool", tool},   {"args", std::move(args)}};
  if (!action.empty()) req["action"] = action;
  return Decide(pif, ledger, DecideInput{&req, kT0});
}

// ---------------------------------------------------------------------------
// Pipe filters and `bash`.
TEST(PipeFilter, OnlyAPureFilterOfAPipeIsCoveredByItsProducer) {
  struct Case {
    const char* line;
    size_t i;
    bool filter;
  };
  const Case cases[] = {
      {"git status | head", 1, true},
      {"git log | head -n 5", 1, true},
      {"git log | tail -20", 1, true},
      {"git log | grep -i fix", 1, true},
      {"git log | grep -e fix -e bug", 1, true},
      {"git log | sort -r | uniq -c", 2, true},
      {"git status ; head", 1, false},              // not fed by a pipe
      {"git status | head /etc/passwd", 1, false},  // reads a file
      {"git status | grep x /etc/shadow", 1, false},
      {"git status | grep -f patterns", 1, false},  // -f reads a file
      {"git status | sort -o out", 1, false},       // -o writes one
      {"git status | sort --compress-program=x", 1, false},
      {"git status | head > out", 1, false},  // redirected
      {"git status | curl x", 1, false},
      {"git status | head", 0, false},
  };
  for (const Case& c : cases) {
    const ShellLine line = ParseShellLine(c.line);
    ASSERT_TRUE(line.ok()) << c.line;
    EXPECT_EQ(IsPipeFilter(line, c.i), c.filter) << c.line << " #" << c.i;
  }
}

TEST(DuragentBash, GitAllowedRunsGitPipedIntoHeadButNotGitThenCurl) {
  const std::string policy = "mode: ask\nallow: [\"bash:git *\"]\n";
  EXPECT_EQ(DecideOne(policy, "bash", {{"command", "git status | head"}})["verdict"], "allow");
  EXPECT_EQ(DecideOne(policy, "bash", {{"command", "git status && git diff"}})["verdict"], "allow");
  EXPECT_EQ(DecideOne(policy, "bash", {{"command", "git status; curl x"}})["verdict"], "ask");
  EXPECT_EQ(DecideOne(policy, "bash", {{"command", "git status | head /etc/passwd"}})["verdict"], "ask");
  const std::string restrict = "mode: restrict\nallow: [\"bash:git *\"]\n";
  EXPECT_EQ(DecideOne(restrict, "bash", {{"command", "git status | head"}})["verdict"], "allow");
  const Json d = DecideOne(restrict, "bash", {{"command", "git status; curl x"}});
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["invocation"], "bash:git status; curl x");
}

TEST(DuragentBash, ASpawnedBackgroundProcessIsHeldCommandByCommandToo) {
  const std::string policy = "mode: dangerous\ndeny: [\"bash:*sudo*\"]\nallow: [\"bash:sleep *\"]\n";
  const Json denied =
      DecideOne(policy, "background_process", {{"action", "spawn"}, {"command", "sleep 1; sudo ls"}});
  EXPECT_EQ(denied["verdict"], "deny");
  EXPECT_EQ(DecideOne(policy, "background_process", {{"action", "spawn"}, {"command", "sleep 5"}})["verdict"],
            "allow");
  // Its other actions are plain built-in calls.
  const Json list = DecideOne("mode: restrict\nallow: [\"builtin:background_process:list\"]\n",
                              "background_process", {{"action", "list"}});
  EXPECT_EQ(list["verdict"], "allow");
  EXPECT_EQ(list["read_only"], true);
}

// ---------------------------------------------------------------------------
// Actions in invocations.
TEST(DuragentPatterns, TheRequestsActionIsMatchedAsToolColonAction) {
  const Json loud =
      DecideOne("mode: dangerous\ndeny: [\"builtin:echo:loud\"]\n", "echo", {{"text", "x"}}, "loud");
  EXPECT_EQ(loud["verdict"], "deny");
  EXPECT_EQ(loud["invocation"], "builtin:echo:loud");
  EXPECT_EQ(DecideOne("mode: dangerous\ndeny: [\"builtin:echo:loud\"]\n", "echo", {{"text", "x"}},
                      "quiet")["verdict"],
            "allow");
  // A tool-level glob holds for every action; an action glob for its own.
  EXPECT_EQ(DecideOne("mode: dangerous\ndeny: [\"builtin:web\"]\n", "web",
                      {{"action", "search"}, {"query", "q"}})["verdict"],
            "deny");
  const std::string search_only = "mode: restrict\nallow: [\"builtin:web:search\"]\n";
  EXPECT_EQ(DecideOne(search_only, "web", {{"action", "search"}, {"query", "q"}})["verdict"], "allow");
  EXPECT_EQ(DecideOne(search_only, "web", {{"action", "fetch"}, {"url", "https://x.test/"}})["verdict"],
            "deny");
  const std::string all = "mode: restrict\nallow: [\"builtin:schedule:*\"]\n";
  const Json list = DecideOne(all, "schedule", {{"action", "list"}});
  EXPECT_EQ(list["verdict"], "allow");
  EXPECT_EQ(list["read_only"], true);
  EXPECT_EQ(
      DecideOne(all, "schedule", {{"action", "create"}, {"tool", "echo"}, {"delay_seconds", 5}})["read_only"],
      false);
}

TEST(DuragentPatterns, McpServerColonStarIsTheServersEveryTool) {
  EXPECT_EQ(McpToolPattern("mcp:github:*"), "mcp:github/*");
  EXPECT_EQ(McpToolPattern("mcp:github:create_issue"), "mcp:github/create_issue");
  EXPECT_EQ(McpToolPattern("mcp:github/x"), "mcp:github/x");
  EXPECT_EQ(McpToolPattern("mcp:*"), "mcp:*");
}

// ---------------------------------------------------------------------------
// Discovery.
void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

TEST(ToolDiscovery, RunOrRunDotAnythingIsTheToolAndReadmeItsDescription) {
  TempDir d;
  WriteFile(d.sub("t/plain/run"), "#!/bin/sh\necho '{}'\n", 0755);
  WriteFile(d.sub("t/shell/run.sh"), "#!/bin/sh\necho '{}'\n", 0755);
  WriteFile(d.sub("t/shell/README.md"), "# shell\n\nSearch the code.\n", 0644);
  WriteFile(d.sub("t/script/run.py"), "print('{}')\n", 0644);  // not executable
  fs::create_directories(d.sub("elsewhere/evil"));
  WriteFile(d.sub("elsewhere/evil/run"), "#!/bin/sh\n", 0755);
  fs::create_directory_symlink(d.sub("elsewhere/evil"), d.sub("t/evil"));
  std::vector<std::string> names;
  for (const auto& f : ScanToolDir(d.sub("t"), CliSource::kWorkspace, false)) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"plain", "shell"})) << "no symlinked dir, no non-executable run";
  const auto written = ScanToolDir(d.sub("t"), CliSource::kAgentWritten, true);
  ASSERT_EQ(written.size(), 3u);
  EXPECT_EQ(written[0].name, "plain");
  EXPECT_EQ(written[1].name, "script");
  EXPECT_EQ(written[1].interpreter, FindProgram("python3")) << "run.py by its extension";
  EXPECT_EQ(written[2].name, "shell");
  EXPECT_EQ(FirstParagraph(written[2].readme), "Search the code.");
  EXPECT_EQ(written[2].sha256.size(), 64u);
}

TEST(ToolDiscovery, DeclaredThenAgentThenWorkspaceThenAgentWrittenWhichNeverShadows) {
  TempDir d;
  ExecutePolicy p;
  p.workspace_root = d.sub("ws");
  p.tools_dir = d.sub("duragent/.duragent/tools");
  p.agents_dir = d.sub("duragent/agents");
  p.orgs = Json::parse(R"({"o1": {"agents": {"a": {}}}})");
  WriteFile(d.sub("duragent/agents/a/code-search.sh"), "#!/bin/sh\n", 0755);
  p.declared_tools["a"]["code-search"] = {d.sub("duragent/agents/a/code-search.sh"),
                                          "Search codebase for patterns", ""};
  WriteFile(p.agents_dir + "/a/tools/code-search/run", "#!/bin/sh\n", 0755);  // the declaration wins
  WriteFile(p.agents_dir + "/a/tools/deploy/run", "#!/bin/sh\n", 0755);
  WriteFile(p.tools_dir + "/deploy/run", "#!/bin/sh\n", 0755);  // the agent's wins
  WriteFile(p.tools_dir + "/lint/run", "#!/bin/sh\n", 0755);
  WriteFile(p.workspace_root + "/o1/a/tools/lint/run.py", "print(1)\n", 0644);  // shadowed: never
  WriteFile(p.workspace_root + "/o1/a/tools/mine/run.py", "print(1)\n", 0644);
  ToolRegistry reg;
  std::vector<std::string> shadowed;
  const Json tools = reg.AgentTools("o1", "a", p, &shadowed);
  std::map<std::string, std::string> source;
  for (const Json& t : tools) source[t["name"]] = t["source"];
  EXPECT_EQ(source, (std::map<std::string, std::string>{{"cli:code-search", "declared"},
                                                        {"cli:deploy", "agent"},
                                                        {"cli:lint", "workspace"},
                                                        {"cli:mine", "agent_written"}}));
  EXPECT_EQ(shadowed, std::vector<std::string>{"cli:lint"});
  // Another org's agent of the same id gets neither the declarations nor the agent directory.
  std::map<std::string, std::string> other;
  for (const Json& t : reg.AgentTools("o2", "a", p)) other[t["name"]] = t["source"];
  EXPECT_EQ(other,
            (std::map<std::string, std::string>{{"cli:deploy", "workspace"}, {"cli:lint", "workspace"}}));
}

// ---------------------------------------------------------------------------
// The issue's reload_tools flow, through the real pipeline.
class ReloadToolsPipeline : public testing::PolicyPipelineTest {};

TEST_F(ReloadToolsPipeline, AnAgentWritesAToolReloadsAndCallsItInTheSameSessionBoundToThoseBytes) {
  StartWith("mode: restrict\nallow: [\"builtin:write_file\", \"builtin:reload_tools\", \"cli:new-*\"]\n");
  const std::string script =
      "#!/usr/bin/env python3\nimport json, sys\nargs = json.load(sys.stdin)\n"
      "print(json.dumps({'hello': args.get('name')}))\n";
  Json w = Call("w1", "write_file",
                {{"path", "tools/new-tool/run.py"}, {"content", script}, {"create_dirs", true}});
  ASSERT_EQ(w["status"], "completed") << w.dump();

  // Not reloaded yet: nothing runs.
  Json before = Call("c0", "cli:new-tool", {{"name", "x"}});
  EXPECT_NE(before["status"], "completed") << before.dump();

  Json reload = Call("r1", "reload_tools", Json::object());
  ASSERT_EQ(reload["status"], "completed") << reload.dump();
  bool listed = false;
  for (const Json& t : reload["result"]["data"]["tools"]) {
    listed = listed || (t["name"] == "cli:new-tool" && t["source"] == "agent_written");
  }
  EXPECT_TRUE(listed) << reload.dump();

  Json call = Call("c1", "cli:new-tool", {{"name", "gate"}});
  ASSERT_EQ(call["status"], "completed") << call.dump();
  EXPECT_EQ(call["result"]["data"]["hello"], "gate");
  EXPECT_EQ(call["decision"]["rule"], "org.allow:cli:new-*");

  // Rewritten after the reload: the decided bytes are gone, so it does not run.
  Call("w2", "write_file", {{"path", "tools/new-tool/run.py"}, {"content", "print('{\"pwned\": 1}')\n"}});
  Json swapped = Call("c2", "cli:new-tool", {{"name", "gate"}});
  EXPECT_EQ(swapped["result"]["error"]["code"], "E_DECISION_MISMATCH") << swapped.dump();
}

}  // namespace
}  // namespace tollgate
