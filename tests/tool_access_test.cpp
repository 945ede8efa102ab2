// Which tools an agent may call and whether a call asks (decide/tool_access.h):
// the answer behind tools/list, GET /v1/tools and `tollgate tools list`.
#include "decide/tool_access.h"

#include <gtest/gtest.h>

namespace tollgate {
namespace {

constexpr int64_t kNow = 1'790'000'000'000'000;

PolicyInForce Policy(const std::string& yaml) {
  PolicyPtr p;
  Status s = LoadPolicyYaml(yaml, "test", &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  PolicyInForce pif;
  pif.SetFile(p);
  return pif;
}

PolicyInForce Default() {
  PolicyPtr p;
  EXPECT_TRUE(LoadPolicyFile(TOLLGATE_SOURCE_DIR "/config/default-policy.yaml", &p).ok());
  PolicyInForce pif;
  pif.SetFile(p);
  return pif;
}

TEST(ToolAccess, UnderTheDefaultPolicyEchoRunsWriteFileAsksAndAnUnknownToolIsNotOffered) {
  const PolicyInForce pif = Default();
  ToolAccess echo = AccessOf(pif, "default", "a1", "echo", kNow);
  EXPECT_TRUE(echo.callable);
  EXPECT_FALSE(echo.asks);
  EXPECT_TRUE(echo.read_only);
  ToolAccess write = AccessOf(pif, "default", "a1", "write_file", kNow);
  EXPECT_TRUE(write.callable);
  EXPECT_TRUE(write.asks);
  EXPECT_TRUE(write.depends_on_arguments);  // a path may hit a deny glob
  EXPECT_FALSE(AccessOf(pif, "default", "a1", "launch_rockets", kNow).callable);
}

TEST(ToolAccess, AnAgentWithGrantsIsOfferedOnlyThoseTools) {
  const PolicyInForce pif = Policy(
      "orgs:\n  default:\n    agents:\n      bot: {tools: [echo, read_file]}\nallow: [builtin:echo]\n");
  EXPECT_TRUE(AccessOf(pif, "default", "bot", "echo", kNow).callable);
  EXPECT_FALSE(AccessOf(pif, "default", "bot", "get_system_info", kNow).callable);
  EXPECT_TRUE(AccessOf(pif, "default", "other", "get_system_info", kNow).callable);
  // The entry is the default org's bot's: another org's bot of the same id is not narrowed by it.
  EXPECT_TRUE(AccessOf(pif, "elsewhere", "bot", "get_system_info", kNow).callable);
}

TEST(ToolAccess, PlanModeHidesMutatingTools) {
  const PolicyInForce pif = Policy("mode: plan\n");
  EXPECT_TRUE(AccessOf(pif, "default", "a", "read_file", kNow).callable);
  EXPECT_FALSE(AccessOf(pif, "default", "a", "write_file", kNow).callable);
  EXPECT_FALSE(AccessOf(pif, "default", "a", "delete_file", kNow).callable);
}

TEST(ToolAccess, ADenyGlobOnTheWholeToolHidesItButOneOnArgumentsDoesNot) {
  const PolicyInForce pif = Policy("deny: [\"builtin:get_system_info\", \"*:*/etc/*\"]\n");
  EXPECT_FALSE(AccessOf(pif, "default", "a", "get_system_info", kNow).callable);
  ToolAccess read = AccessOf(pif, "default", "a", "read_file", kNow);
  EXPECT_TRUE(read.callable);
  EXPECT_TRUE(read.depends_on_arguments);
}

TEST(ToolAccess, AnOrgsAllowlistLimitsItsAgentsOnly) {
  const PolicyInForce pif = Policy("orgs:\n  acme: {tool_allowlist: [echo]}\n");
  EXPECT_TRUE(AccessOf(pif, "acme", "a", "echo", kNow).callable);
  EXPECT_FALSE(AccessOf(pif, "acme", "a", "read_file", kNow).callable);
  EXPECT_TRUE(AccessOf(pif, "other", "a", "read_file", kNow).callable);
}

}  // namespace
}  // namespace tollgate
