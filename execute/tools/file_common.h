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
// Standard base64 (for file content that is not UTF-8). Decoding into the
// input string itself is allowed.
std::string Base64Encode(const std::string& in);
bool Base64Decode(const std::string& in, std::string* out);

// A path a file tool acts on must name something: "" or one holding a NUL
// byte is E_INVALID_PATH.
Status CheckFilePath(const std::string& rel);
// Limits on an agent's path, checked before anything is created: at most
// 4096 bytes, 255 bytes a component, 256 components (E_PATH_FORBIDDEN).
inline constexpr size_t kMaxPathBytes = 4096, kMaxPathComponentBytes = 255, kMaxPathComponents = 256;
Status CheckPathLimits(const std::string& rel);
// The path a file tool acts on: args' path, normalised by the function
// decide's subject uses (core/url.h NormalizePath), so the file opened is
// the one the policy matched.
std::string ToolPath(const std::string& rel);
bool IsValidUtf8(const std::string& s);

}  // namespace tollgate
