// Helpers shared by the file tools (read_file, write_file, list_directory,
// file_exists, delete_file, search_files). All paths go through Workspace.
#pragma once

#include <string>

#include "execute/tool.h"
#include "execute/workspace.h"

namespace tollgate {

// Opens the calling agent's workspace; on failure *error is the ToolResult.
bool OpenWorkspace(const ToolContext& ctx, Workspace* ws, Json* error);
// The ToolResult for a failed Status.
Json FailFrom(const Status& s);
// Reads at most `cap` + 1 bytes of `fd` into *out.
Status ReadCapped(int fd, size_t cap, std::string* out);
// Standard base64 (for file content that is not UTF-8).
std::string Base64Encode(const std::string& in);
bool Base64Decode(const std::string& in, std::string* out);
bool IsValidUtf8(const std::string& s);

}  // namespace tollgate
