// The one argument contract of the built-ins: a request's args are checked
// against its tool's JSON Schema (core/tool_schemas.cpp, InputSchemaOf)
// wherever the request enters. Ingest calls it for every request, so Kafka,
// HTTP and MCP (which all submit to tollgate.requests) are held to the same
// contract; MCP's gateway also checks before it submits, to answer -32602.
//
// An unknown argument, a missing required one or one of the wrong type or
// range is E_INVALID_ARGS whose message names the field (a JSON pointer
// under /args), never its value: nothing is silently ignored. Tools that
// are not built-ins (cli:, mcp:, http_request aliases) pass here; their
// own contracts are checked by decide (aliases) or their server (mcp:).
//
// Schemas are compiled once, on first use; both are thread-safe. Execute
// applies CheckArgsShape to cli: and mcp: tools before it runs them.
#pragma once

#include <string_view>

#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

Status CheckToolArgs(std::string_view tool, const Json& args);

// Whether a built-in's schema names an `action` argument (Duragent's web,
// schedule, background_process, session, memory).
bool ToolTakesAction(std::string_view tool);

// The shape check of a schema that is not ours (an upstream MCP server's
// inputSchema, a CLI tool's schema.json): required arguments present, no
// argument the schema does not name when it closes additionalProperties,
// each named one of its declared JSON type. Nothing else of the schema is
// read (no patterns: an upstream's regex is not compiled here). "" when
// the args fit, else what is wrong, naming the argument.
std::string CheckArgsShape(const Json& schema, const Json& args);

}  // namespace tollgate
