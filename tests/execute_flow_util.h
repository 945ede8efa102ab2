// Calls as the execute stage meets them: an allowed flow, the log events
// ingest and decide would have written for it, and the message decide sends
// to execute (the stage checks the flow against the log: core/flow_stage.h).
#pragma once

#include <string>

#include "core/flow_stage.h"
#include "core/invocation.h"
#include "core/messages.h"
#include "core/sha256.h"
#include "tests/test_util.h"

namespace tollgate::testing {

// The flow of a call decide allowed (nothing logged). The decision holds
// the invocation (and file subject) decide records, which execute checks
// (execute/invocation_check.h); `extra` adds or replaces decision fields
// (read_only, verdict).
inline Flow AllowedFlow(const std::string& rid, const std::string& tool, const Json& args,
                        const Json& extra = Json::object()) {
  Flow f;
  f.request = {{"request_id", rid},  {"org_id", "o1"}, {"agent_id", "a1"},
               {"session_id", "s1"}, {"tool", tool},   {"args", args}};
  f.received_at = "2026-11-22T00:00:00.000000Z";
  f.args_hash = ArgsHash(args);
  f.decision = {{"verdict", "allow"},
                {"reason", "test"},
                {"rule", "t"},
                {"danger_level", "low"},
                {"policy_version", "v1"}};
  f.decision["invocation"] = BuildInvocation(tool, args, "");
  if (const std::string subject = FileSubject(tool, args); !subject.empty()) f.decision["subject"] = subject;
  for (const auto& [k, v] : extra.items()) f.decision[k] = v;
  return f;
}

// request.received as ingest writes it: content_hash is SHA-256 of the
// canonical request, which execute checks the flow against.
inline Event ReceivedEvent(const Flow& f) {
  std::string canon;
  EXPECT_TRUE(CanonicalBytes(f.request, &canon).ok());
  return FlowEvent(f, "request.received", 1,
                   {{"request", f.request},
                    {"received_at", f.received_at},
                    {"args_hash", f.args_hash},
                    {"content_hash", Sha256Hex(canon)},
                    {"source", "test"},
                    {"redacted", Json::array()}});
}

// Logs request.received and the allow decision of a call in `log`; the
// message decide would send to execute.
inline Message LogAllowed(MemoryLog* log, const Topics& topics, const std::string& rid,
                          const std::string& tool, const Json& args, const Json& extra = Json::object()) {
  Flow f = AllowedFlow(rid, tool, args, extra);
  log->Append({ReceivedEvent(f), FlowEvent(f, "decision.made", 2, f.decision)});
  return MessageFor(topics.execute(), f.request, f.ToJson());
}

}  // namespace tollgate::testing
