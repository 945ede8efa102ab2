// A seed's conformance suite (tests/seeds/NNN_*.json, docs/seeds.md): the
// documented items of one seed document (tools, parameters, result fields,
// error codes, ToolResult contract fields) and its documented examples, each
// with what must come back. The C++ runner sends the examples through the
// real pipeline on Kafka; tests/seeds/seeds.test.mjs sends the same file's
// examples through MCP with the official SDK. Both print their coverage.
//
// An example covers: "tool T" (T its "name_of", else its tool) and the
// name it called T by; its danger level when it asserts one; "T.k" of the params for each args key k;
// "T.f" of the fields for each expected data field f; its error code; and
// the contract fields it asserts; plus what its "covers" lists (a policy
// setting the example shows). An item is served when an example covering
// it passed; items in "elsewhere" are shown by the test named there instead.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/canonical_json.h"

namespace tollgate::testing {

struct SeedSuite {
  std::string file;  // e.g. 002_ai_orchestrator.json
  Json doc;

  static SeedSuite Load(const std::string& path);
  // Every documented item, as "tools:read_file", "params:read_file.path"...
  std::vector<std::string> Items() const;
  // The items example `ex` covers (keys as Items()).
  std::set<std::string> Covers(const Json& ex) const;
  // Where `ex` fails `result` (a ToolResult: success, data, error, meta);
  // "" when it holds. `server_got` is what the loopback server received last:
  // {json: body parsed or null, headers: {lower-case name: value}, query}.
  // `danger` is the danger level the gate gave the call (decision.danger_level).
  static std::string Check(const Json& ex, const Json& tool_result, const Json& server_got,
                           const std::string& danger);
  // "seed 002 (title): N of M documented items served (K shown elsewhere)".
  std::string Coverage(const std::set<std::string>& served) const;
};

// `args` with "{{server}}" and "{{closed}}" replaced by the given origins.
Json Substitute(const Json& args, const std::string& server, const std::string& closed);

}  // namespace tollgate::testing
