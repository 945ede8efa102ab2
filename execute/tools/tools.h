// Factories of the built-in tools, one file each; registry.cpp registers them.
#pragma once

#include <memory>

#include "execute/tool.h"

namespace tollgate {

std::unique_ptr<Tool> MakeEcho();
std::unique_ptr<Tool> MakeCurrentTime();
std::unique_ptr<Tool> MakeCalculate();
std::unique_ptr<Tool> MakeReadFile();
std::unique_ptr<Tool> MakeWriteFile();
std::unique_ptr<Tool> MakeListDirectory();
std::unique_ptr<Tool> MakeFileExists();
std::unique_ptr<Tool> MakeDeleteFile();
std::unique_ptr<Tool> MakeSearchFiles();
std::unique_ptr<Tool> MakeHttpRequest();
std::unique_ptr<Tool> MakeExecuteCommand();
std::unique_ptr<Tool> MakeGetAuditLog();
std::unique_ptr<Tool> MakeGetSystemInfo();

}  // namespace tollgate
