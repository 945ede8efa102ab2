// The schemas of schemas/*.schema.json, compiled into the binary.
//
// The definition is generated at build time by embed_schemas.cmake; see
// schemas/CMakeLists.txt. Use core/schema.h to validate; this is the raw
// material it parses.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

namespace tollgate {

// (name, JSON text) of every schema, sorted by name. The name is the file
// name without ".schema.json" ("tool_request", "event_data.decision.made").
// The texts are static storage; the vector is built once and never changes.
const std::vector<std::pair<std::string_view, std::string_view>>& EmbeddedSchemas();

}  // namespace tollgate
