// CLI tool discovery (see cli_tool.cpp for the calling convention).
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "core/tool_descriptor.h"
#include "execute/tool.h"

namespace tollgate {

// One Tool per <dir>/<name>/run that is an executable file, named
// "cli:<name>"; <name> is [A-Za-z0-9_-]{1,64}. A missing dir gives none.
std::vector<std::unique_ptr<Tool>> DiscoverCliTools(const std::string& dir);

// What a client is told of each tool DiscoverCliTools finds: the first
// paragraph of its README.md (headings skipped, at most 1,000 bytes) and
// its <dir>/<name>/schema.json when that is a JSON object schema of type
// "object" ({"type":"object"} otherwise).
std::vector<ToolDescriptor> CliToolDescriptors(const std::string& dir);

}  // namespace tollgate
