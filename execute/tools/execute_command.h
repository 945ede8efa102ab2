// What an execute_command call would run, for tools that run a command line
// their own way (background_process starts it and keeps it running).
#pragma once

#include "execute/sandbox.h"
#include "execute/tool.h"
#include "execute/workspace.h"

namespace tollgate {

// `args` ({command, args?, role?}) read and checked exactly as
// execute_command reads and checks them (docs/tools.md, "execute_command":
// the parser, allowlist, blocklist, refused options, destructive patterns,
// redirections, unanalysable lines run only as approved). Null with the
// agent's workspace opened in *ws and *spec filled (program, argv, the
// scrubbed env, cwd_fd = ws->fd(), execute_command's limits, run_dir,
// run_as; no stdin); else the refusal, a ToolResult.
Json PrepareCommand(const Json& args, const ToolContext& ctx, Workspace* ws, ProcessSpec* spec);

}  // namespace tollgate
