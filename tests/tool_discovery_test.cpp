// Discovery (core/tool_discovery.h): ADR-012's filters and the Kaizen
// seed's three formats, checked against the seed's own example tool.
#include "core/tool_discovery.h"

#include <gtest/gtest.h>

namespace tollgate {
namespace {

const Json kSchema = Json::parse(
    R"({"type":"object","properties":{"path":{"type":"string","description":"File path"}},"required":["path"]})");

Json Directory() {
  return Json::array({
      {{"name", "mcp:filesystem/read_file"},
       {"description", "Read a file from the filesystem"},
       {"input_schema", kSchema},
       {"source", "mcp"},
       {"category", "mcp"},
       {"danger", "HIGH"}},
      {{"name", "read_file"},
       {"description", "Read a file in the agent's workspace."},
       {"input_schema", kSchema},
       {"source", "builtin"},
       {"category", "filesystem"},
       {"danger", "SAFE"}},
      {{"name", "delete_file"},
       {"description", "Delete a file."},
       {"input_schema", kSchema},
       {"source", "builtin"},
       {"category", "filesystem"},
       {"danger", "HIGH"}},
      {{"name", "http_get"},
       {"description", "HTTP GET request"},
       {"input_schema", {{"type", "object"}}},
       {"source", "builtin"},
       {"category", "network"},
       {"danger", "SAFE"}},
  });
}

std::vector<std::string> Names(const Json& tools) {
  std::vector<std::string> out;
  for (const Json& t : tools) out.push_back(t.contains("function") ? t["function"]["name"] : t["name"]);
  return out;
}

TEST(ToolDiscovery, FiltersByCategorySafetyAndKeywordTogether) {
  EXPECT_EQ(Names(DiscoverTools(Directory(), {"filesystem", false, "", ""})),
            (std::vector<std::string>{"read_file", "delete_file"}));
  EXPECT_EQ(Names(DiscoverTools(Directory(), {"", true, "", ""})),
            (std::vector<std::string>{"read_file", "http_get"}));
  EXPECT_EQ(Names(DiscoverTools(Directory(), {"", false, "FILE", ""})),
            (std::vector<std::string>{"mcp:filesystem/read_file", "read_file", "delete_file"}))
      << "the keyword matches names and descriptions in any case";
  EXPECT_EQ(Names(DiscoverTools(Directory(), {"filesystem", true, "read", ""})),
            (std::vector<std::string>{"read_file"}));
  EXPECT_TRUE(DiscoverTools(Directory(), {"qa", false, "", ""}).empty());
}

// The seed's example: one MCP tool and its OpenAI and Anthropic forms.
TEST(ToolDiscovery, TheThreeFormatsAreTheSeedsShapes) {
  const Json mcp_tool = DiscoverTools(Directory(), {"mcp", false, "", "mcp"})[0];
  EXPECT_EQ(mcp_tool, (Json{{"name", "mcp__filesystem__read_file"},
                            {"description", "Read a file from the filesystem"},
                            {"inputSchema", kSchema}}));
  const Json openai_tool = DiscoverTools(Directory(), {"mcp", false, "", "openai"})[0];
  EXPECT_EQ(openai_tool, (Json{{"type", "function"},
                               {"function",
                                {{"name", "mcp__filesystem__read_file"},
                                 {"description", "Read a file from the filesystem"},
                                 {"parameters", kSchema}}}}));
  const Json anthropic_tool = DiscoverTools(Directory(), {"mcp", false, "", "anthropic"})[0];
  EXPECT_EQ(anthropic_tool, (Json{{"name", "mcp__filesystem__read_file"},
                                  {"description", "Read a file from the filesystem"},
                                  {"input_schema", kSchema}}));
  EXPECT_EQ(ToolFromClientName("mcp__filesystem__read_file"), "mcp:filesystem/read_file");
}

TEST(ToolDiscovery, AnUnknownFormatIsRefusedByName) {
  EXPECT_EQ(CheckToolQuery({"", false, "", "yaml"}).code(), "E_INVALID_QUERY");
  EXPECT_TRUE(CheckToolQuery({"network", true, "http", "openai"}).ok());
  EXPECT_EQ(CheckToolQuery({std::string(300, 'x'), false, "", ""}).code(), "E_INVALID_QUERY");
}

}  // namespace
}  // namespace tollgate
