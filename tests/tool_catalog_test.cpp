// The tool catalog (core/tool_catalog.h) is the one source of per-tool
// facts: execute's registry, execute's re-run rule, decide's registry step
// and the file-tool subject all answer as it says.
#include "core/tool_catalog.h"

#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <set>
#include <string>

#include "core/invocation.h"
#include "decide/policy_engine.h"
#include "execute/registry.h"

namespace tollgate {
namespace {

std::unique_ptr<ToolRegistry> Builtins() {
  auto r = std::make_unique<ToolRegistry>();
  r->RegisterBuiltins();
  return r;
}

// Decide's decision for one call under an empty policy (every default).
Decision DecideDefault(const std::string& tool, const Json& args) {
  PolicyPtr p;
  Status s = LoadPolicyYaml("", "test", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  PolicyInForce pif;
  pif.SetFile(p);
  Json req = {{"request_id", "r1"}, {"org_id", "o"}, {"agent_id", "a"},
              {"session_id", "s"},  {"tool", tool},  {"args", args}};
  Decision d;
  DecideInto(pif, BudgetLedger(), DecideInput{&req, 0}, &d);
  return d;
}

TEST(ToolCatalog, ListsExactlyTheToolsExecuteRegisters) {
  std::set<std::string> catalog, registered;
  for (const ToolFacts& t : BuiltinTools()) {
    EXPECT_TRUE(catalog.insert(std::string(t.name)).second) << "listed twice: " << t.name;
  }
  for (const Json& t : Builtins()->List()) registered.insert(t["name"].get<std::string>());
  EXPECT_EQ(catalog, registered);
}

TEST(ToolCatalog, ExecuteToolsTakeTheirDescriptionAndReadOnlyAnswerFromIt) {
  auto r = Builtins();
  for (const ToolFacts& t : BuiltinTools()) {
    auto tool = r->Find(std::string(t.name));
    ASSERT_NE(tool, nullptr) << t.name;
    EXPECT_EQ(tool->name(), t.name);
    EXPECT_EQ(tool->description(), t.description);
    EXPECT_FALSE(t.description.empty()) << t.name;
    if (t.reads == Reads::kByMethod) continue;
    EXPECT_EQ(tool->ReadOnly(Json::object(), Json::object()), t.reads == Reads::kReadOnly) << t.name;
  }
}

TEST(ToolCatalog, DecidesBuiltinCheckAndDefaultsAgreeWithIt) {
  for (const ToolFacts& t : BuiltinTools()) {
    bool read_only = !t.read_only();
    EXPECT_TRUE(IsBuiltinTool(t.name, &read_only)) << t.name;
    EXPECT_EQ(read_only, t.read_only()) << t.name;
    Decision d = DecideDefault(std::string(t.name), {{"method", "POST"}, {"url", "https://x.test/"}});
    EXPECT_NE(d.rule, "registry:unknown-tool") << t.name;
    EXPECT_EQ(d.danger, t.danger) << t.name;
    EXPECT_EQ(d.read_only, t.read_only()) << t.name << ": a POST is mutating";
  }
}

TEST(ToolCatalog, HttpRequestIsReadOnlyForGetHeadAndOptionsInDecideAndExecute) {
  auto registry = Builtins();
  auto http = registry->Find("http_request");
  ASSERT_NE(http, nullptr);
  for (const char* m : {"GET", "get", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PATCH"}) {
    Json args = {{"method", m}, {"url", "https://x.test/a"}};
    std::string upper = m;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const bool want = upper == "GET" || upper == "HEAD" || upper == "OPTIONS";
    EXPECT_EQ(IsReadOnlyMethod(upper), want) << m;
    EXPECT_EQ(http->ReadOnly(args, Json::object()), want) << m;
    EXPECT_EQ(DecideDefault("http_request", args).read_only, want) << m;
  }
  EXPECT_TRUE(http->ReadOnly({{"url", "https://x.test/"}}, Json::object())) << "no method is a GET";
}

TEST(ToolCatalog, FileToolsAndOnlyThemHaveAPathSubject) {
  const Json args = {{"path", "notes//a.txt"}};
  for (const ToolFacts& t : BuiltinTools()) {
    const std::string name(t.name);
    EXPECT_EQ(IsFileTool(name), t.file_tool) << name;
    EXPECT_EQ(!FileSubject(name, args).empty(), t.file_tool) << name;
    EXPECT_EQ(DecideDefault(name, args).subject, t.file_tool ? name + ":notes/a.txt" : "") << name;
  }
}

TEST(ToolCatalog, InlineToolsArePureReadOnlyAndTouchNoFiles) {
  std::set<std::string> inline_tools;
  for (const ToolFacts& t : BuiltinTools()) {
    EXPECT_EQ(RunsInline(t.name), t.runs_inline) << t.name;
    if (!t.runs_inline) continue;
    inline_tools.insert(std::string(t.name));
    EXPECT_EQ(t.reads, Reads::kReadOnly) << t.name;
    EXPECT_FALSE(t.file_tool) << t.name;
  }
  EXPECT_EQ(inline_tools, (std::set<std::string>{"echo", "current_time", "calculate", "get_datetime"}));
}

TEST(ToolCatalog, CliToolsAndUnknownNamesAreNotBuiltins) {
  for (const char* name : {"cli:deploy", "cli:", "no_such_tool", ""}) {
    EXPECT_EQ(FindBuiltinTool(name), nullptr) << name;
    EXPECT_FALSE(IsBuiltinTool(name, nullptr)) << name;
    EXPECT_FALSE(IsFileTool(name)) << name;
    EXPECT_FALSE(RunsInline(name)) << name;
  }
  Decision cli = DecideDefault("cli:deploy", Json::object());
  EXPECT_EQ(cli.danger, DangerLevel::kHigh) << "a CLI tool the policy does not name is HIGH";
  EXPECT_FALSE(cli.read_only);
  EXPECT_EQ(DecideDefault("no_such_tool", Json::object()).rule, "registry:unknown-tool");
}

}  // namespace
}  // namespace tollgate
