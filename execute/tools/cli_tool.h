// CLI tool discovery (see cli_tool.cpp for the calling convention).
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "execute/tool.h"

namespace tollgate {

// One Tool per <dir>/<name>/run that is an executable file, named
// "cli:<name>"; <name> is [A-Za-z0-9_-]{1,64}. A missing dir gives none.
std::vector<std::unique_ptr<Tool>> DiscoverCliTools(const std::string& dir);

}  // namespace tollgate
