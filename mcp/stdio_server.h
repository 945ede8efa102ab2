// The stdio transport of MCP: newline-delimited JSON-RPC messages on stdin,
// answers and notifications on stdout (stderr is for people). One session
// per process, as a client that spawns `tollgate mcp` expects.
#pragma once

#include <chrono>

#include "mcp/session.h"

namespace tollgate::mcp {

// A line longer than this is refused (-32600) and skipped, not buffered.
inline constexpr size_t kMaxStdioMessageBytes = 4 << 20;

// Serves `session` until `in_fd` reaches end of file. Each tools/call runs
// on a thread of its own, so a call waiting for an approver holds neither
// pings nor other calls nor its own cancellation. Every `watch_every` the
// agent's tool list is compared with the last one sent and a change is
// announced (notifications/tools/list_changed). At end of file the session
// ends (Session::End): calls still waiting are withdrawn. Returns 0.
int ServeStdio(Session& session, int in_fd, int out_fd, std::chrono::milliseconds watch_every);

}  // namespace tollgate::mcp
