// CLI tools and their discovery (docs/tools.md, "CLI tools" and "Tool
// declarations"; see cli_tool.cpp for the calling convention).
//
// A tool directory holds one subdirectory per tool, <dir>/<name>/, whose
// executable is a file named `run` or `run.*` (Duragent's convention: run,
// run.sh, run.py...) and whose description is its README.md. <name> is
// [A-Za-z0-9_-]{1,64}; the tool is called as "cli:<name>".
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "core/tool_descriptor.h"
#include "execute/tool.h"

namespace tollgate {

// Where a CLI tool was found, highest precedence first (Duragent's rules:
// explicit declarations win, then the agent's directory, then the
// workspace's). kAgentWritten is the agent's own workspace `tools/`, which
// the agent can write: it comes last, never shadows an operator's tool, and
// runs only the bytes decide bound it to (decision.tool_sha256).
enum class CliSource { kDeclared, kAgent, kWorkspace, kAgentWritten };
const char* CliSourceName(CliSource s);

struct CliToolFile {
  std::string name;         // without "cli:"
  std::string run_path;     // absolute
  std::string interpreter;  // "" = run_path is executed itself
  std::string readme;       // README's text (at most 4,000 bytes)
  std::string sha256;       // of run_path's bytes
  CliSource source = CliSource::kWorkspace;
};

// The tools of one directory; none when it is missing. In each <name>/,
// `run` wins, else the first `run.*` by name. An executable file runs
// itself. A file that is not executable is taken only when
// `allow_interpreter` (the agent-written directory, where write_file makes
// no executables) and its #! line or extension names python3, sh, bash or
// node. Symlinks are never followed, and a `run` over 1 MiB is skipped.
std::vector<CliToolFile> ScanToolDir(const std::string& dir, CliSource source, bool allow_interpreter);

// One declared tool (agent.yaml: `command`, `description`, `readme`).
CliToolFile DeclaredToolFile(const std::string& name, const std::string& command,
                             const std::string& description, const std::string& readme_path);

std::unique_ptr<Tool> MakeCliTool(CliToolFile file);

// One Tool per tool ScanToolDir(dir, kWorkspace, false) finds.
std::vector<std::unique_ptr<Tool>> DiscoverCliTools(const std::string& dir);

// What a client is told of each tool DiscoverCliTools finds: the first
// paragraph of its README.md (headings skipped, at most 1,000 bytes) and
// its <dir>/<name>/schema.json when that is a JSON object schema of type
// "object" ({"type":"object"} otherwise).
std::vector<ToolDescriptor> CliToolDescriptors(const std::string& dir);

// README text -> its first paragraph (as above).
std::string FirstParagraph(const std::string& text);

}  // namespace tollgate
