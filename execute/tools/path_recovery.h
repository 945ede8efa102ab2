// Auto-recovery for paths that do not exist (the AI Orchestrator seed's
// "Auto-Recovery System"; docs/errors.md): which component of the agent's
// path is missing, and which workspace paths it may have meant. Everything is
// read beneath the agent's workspace (openat2 RESOLVE_BENEATH, no symlink
// followed while searching) and the work is bounded, so a hostile workspace
// cannot make an error slow or leak a name from outside it.
#pragma once

#include <string>
#include <vector>

#include "execute/tool.h"
#include "execute/workspace.h"

namespace tollgate {

inline constexpr size_t kMaxSuggestions = 5;
inline constexpr int kSuggestDepth = 3;          // how deep the same-name search looks
inline constexpr size_t kMaxSuggestScan = 4000;  // entries read by one search, at most

// The ToolResult for a file tool that failed with `s` on the agent's path
// `rel` (want_dir: the tool needs a directory there, as list_directory and
// search_files do). A not-found failure becomes, with error.missing (the
// first workspace path that is not there) and error.suggestions:
// - E_DIR_NOT_FOUND: a directory on the way is missing, or the target when
//   want_dir (also when the target is a file);
// - E_FILE_NOT_FOUND: the last component is missing;
// - E_PATH_NOT_FOUND: a component on the way is a file, not a directory.
// All three are recoverable. Any other failure is FailFrom(s), except that
// E_TOOL_EXEC (an unexpected OS error) becomes `io_code` when one is given
// (E_READ_ERROR, E_WRITE_ERROR, E_LIST_ERROR, E_SEARCH_ERROR).
Json FailPath(const Workspace& ws, const std::string& rel, const Status& s, bool want_dir,
              const char* io_code = nullptr);

// Up to kMaxSuggestions workspace-relative paths that `missing` (a
// normalised workspace-relative path whose parent exists) may have meant,
// best first: entries of the same name elsewhere at depth <= kSuggestDepth
// (directories when want_dir, else files), shallowest first; then names in
// its parent directory a typo away (case, at most 2 edits, or another
// extension).
std::vector<std::string> RecoverySuggestions(const Workspace& ws, const std::string& missing, bool want_dir);

}  // namespace tollgate
