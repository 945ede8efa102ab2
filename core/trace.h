// W3C Trace Context (https://www.w3.org/TR/trace-context/) for tool calls:
// the agent's `traceparent` is accepted at the edge (the Kafka header on
// tollgate.requests, MCP params._meta.traceparent, the HTTP header on
// /mcp), moves along every hop as the Kafka header of the same name and is
// recorded as data.traceparent on every event of the request
// (docs/operations.md, "Trace context"). Only a well-formed value is ever
// copied: agents are adversarial, and a header is not covered by their
// signature.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/event.h"
#include "core/message.h"

namespace tollgate {

struct StageResult;

// The event data field that records it.
inline constexpr const char* kTraceField = "traceparent";

// True for a version-00 traceparent exactly as W3C writes it:
// "00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>", lowercase,
// neither id all zeros. Anything else (other versions, extra fields,
// whitespace, upper case) is refused.
bool IsValidTraceparent(std::string_view v);

// The trace tollgate starts for a request whose agent sent none (or an
// invalid one): derived from (org, request_id), so processing the same
// request again (after a crash, from the reconciler) makes the same events.
// Sampled flag set.
std::string NewTraceparent(std::string_view org_id, std::string_view request_id);

// The message's traceparent header when valid, else "".
std::string TraceparentOf(const Message& m);
// What an event records (data.traceparent when valid), else "".
std::string TraceparentOf(const Event& e);
// A request's trace: what its first event recording one says (ingest's
// request.received), else "".
std::string RequestTraceparent(const std::vector<Event>& history);

// Sets `tp` on `m` / `e`, when `tp` is not empty and `m` / `e` has none yet.
void StampTraceparent(const std::string& tp, Message* m);
void StampTraceparent(const std::string& tp, Event* e);
// Both, on every output and on every event about a request (request_id
// set) of `r`: the runner does this with its input's traceparent, so no
// stage forgets; what a stage set itself is kept.
void StampTraceparent(const std::string& tp, StageResult* r);

}  // namespace tollgate
