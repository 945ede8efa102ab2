// Test helpers for approvals: the events decide writes when it answers
// `ask`, and the Flow it sends to the approve topic.
//
// Until the decide stage asks by itself (the decide issue), tests stand in
// for it here: MakeAsk builds request.received (with the content_hash the
// stages check a flow against) + decision.made (with the contracts file's
// `approval` block) and the Flow, which matches them exactly. When decide lands,
// integration tests can submit a request that its policy asks about instead
// (one place: ApprovalsPipelineTest::Ask).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/messages.h"
#include "core/sha256.h"

namespace tollgate::testing {

struct AskSpec {
  std::string request_id = "r1";
  std::string org = "org-1";
  std::string agent = "agent-1";
  std::string session = "sess-1";
  std::string tool = "echo";
  Json args = {{"text", "hi"}};
  int quorum = 1;
  std::vector<std::string> approvers;  // empty: any approver of the org
  int timeout_s = 900;
  std::string invocation;  // default "builtin:<tool>"
  std::string subject;     // file tools: "TOOL:PATH"; none when empty
  bool notify = false;     // the decision's notify flag
};

struct Ask {
  std::vector<Event> events;  // request.received, decision.made
  Flow flow;                  // what decide sends to the approve topic
};

inline Ask MakeAsk(const AskSpec& s, int64_t decided_us) {
  Json request{{"request_id", s.request_id}, {"org_id", s.org}, {"agent_id", s.agent},
               {"session_id", s.session},    {"tool", s.tool},  {"args", s.args}};
  const std::string args_hash = ArgsHash(s.args);
  const std::string received_at = FormatTime(decided_us - 1000);
  auto make = [&](const std::string& type, int64_t t, Json data) {
    Event e;
    e.type = type;
    e.request_id = s.request_id;
    e.id = MakeRequestEventId(s.org, type, s.request_id);  // request ids are scoped by org
    e.time_us = t;
    e.org_id = s.org;
    e.agent_id = s.agent;
    e.session_id = s.session;
    e.tool = s.tool;
    e.data = std::move(data);
    return e;
  };
  // As ingest logs it: stages check a flow against content_hash (SHA-256
  // of the canonical request), received_at and args_hash.
  std::string canon;
  if (!CanonicalBytes(request, &canon).ok()) std::abort();
  Ask a;
  a.events.push_back(make("request.received", decided_us - 1000,
                          {{"request", request},
                           {"args_hash", args_hash},
                           {"content_hash", Sha256Hex(canon)},
                           {"received_at", received_at},
                           {"source", "test"},
                           {"redacted", Json::array()}}));
  Json decision{{"verdict", "ask"},
                {"reason", "'" + s.tool + "' needs a human"},
                {"rule", "test:ask"},
                {"danger_level", "HIGH"},
                {"policy_version", "test-v1"},
                {"invocation", s.invocation.empty() ? "builtin:" + s.tool : s.invocation},
                {"read_only", true},
                {"approval", {{"quorum", s.quorum}, {"approvers", s.approvers}, {"timeout_s", s.timeout_s}}}};
  if (s.notify) decision["notify"] = Json::array({"*:*"});  // as decide lists matched notify patterns
  if (!s.subject.empty()) decision["subject"] = s.subject;
  a.events.push_back(make("decision.made", decided_us, decision));
  a.flow = Flow{request, received_at, args_hash, decision};
  return a;
}

inline Json Response(const std::string& rid, const std::string& decision, const std::string& approver,
                     const std::string& args_hash, const std::string& scope = "once",
                     const std::string& response_id = "") {
  Json r{{"request_id", rid},
         {"decision", decision},
         {"approver", approver},
         {"scope", scope},
         {"args_hash", args_hash}};
  if (!response_id.empty()) r["response_id"] = response_id;
  return r;
}

}  // namespace tollgate::testing
