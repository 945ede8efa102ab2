// Factories of the built-in tools, one file each; registry.cpp registers them.
#pragma once

#include <memory>
#include <string_view>

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
// The AI Orchestrator seed's (get_datetime.cpp, list_llm_models.cpp,
// search_directory.cpp, qa_tools.cpp).
std::unique_ptr<Tool> MakeGetDatetime();
std::unique_ptr<Tool> MakeListLlmModels();
std::unique_ptr<Tool> MakeSearchDirectory();
std::unique_ptr<Tool> MakeGitStatus();
std::unique_ptr<Tool> MakeGitDiff();
std::unique_ptr<Tool> MakeRunTests();
std::unique_ptr<Tool> MakeRunLint();
std::unique_ptr<Tool> MakeRunFormat();
std::unique_ptr<Tool> MakeRunBuild();
std::unique_ptr<Tool> MakeRunTypecheck();
// Kaizen's (kaizen_http.cpp, bash_command.cpp): `name` is one of http_get,
// http_post, http_put, http_delete, fetch_url, extract_links.
std::unique_ptr<Tool> MakeKaizenHttpTool(std::string_view name);
// `name` is bash_command (Kaizen's) or bash (Duragent's).
std::unique_ptr<Tool> MakeBashCommand(std::string_view name);
// Duragent's (docs/tools.md, "Duragent's tools"), one file each.
std::unique_ptr<Tool> MakeReloadTools();
std::unique_ptr<Tool> MakeWeb();
std::unique_ptr<Tool> MakeSchedule();
std::unique_ptr<Tool> MakeBackgroundProcess();
std::unique_ptr<Tool> MakeSession();
std::unique_ptr<Tool> MakeMemory();

}  // namespace tollgate
