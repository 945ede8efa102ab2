// schemas/ and core/schema: the JSON Schemas of the public contract and the
// registry that validates against them. For every schema: good documents
// pass, and each kind of bad one (wrong type, missing field, bad enum value,
// unknown field) fails with E_SCHEMA_VIOLATION and a message naming the
// field.
#include "core/schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/credentials.h"
#include "core/event.h"
#include "core/messages.h"
#include "core/status.h"

namespace tollgate {
namespace {

const SchemaRegistry& Registry() { return SchemaRegistry::Builtin(); }

const std::string kHash(64, 'a');
const std::string kTime = "2026-11-22T10:40:24.123456Z";

// `doc` with the value at JSON pointer `ptr` replaced (or added).
Json With(Json doc, const std::string& ptr, Json value) {
  doc[Json::json_pointer(ptr)] = std::move(value);
  return doc;
}

// `doc` without the member at JSON pointer `ptr`.
Json Without(Json doc, const std::string& ptr) {
  Json::json_pointer p(ptr);
  doc[p.parent_pointer()].erase(p.back());
  return doc;
}

::testing::AssertionResult Accepted(std::string_view schema, const Json& doc) {
  Status s = Registry().Validate(schema, doc);
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << schema << " refused " << doc.dump() << ": " << s.ToString();
}

// Refused by `schema` with E_SCHEMA_VIOLATION and a message containing
// `needle` (the field's pointer, usually).
::testing::AssertionResult Refused(std::string_view schema, const Json& doc, std::string_view needle) {
  Status s = Registry().Validate(schema, doc);
  if (s.ok()) return ::testing::AssertionFailure() << schema << " accepted " << doc.dump();
  if (s.code() != errc::kSchemaViolation) return ::testing::AssertionFailure() << "code " << s.ToString();
  if (s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message '" << s.message() << "' does not contain '" << needle << "'";
  }
  return ::testing::AssertionSuccess();
}

std::string MessageOf(std::string_view schema, const Json& doc) {
  return Registry().Validate(schema, doc).message();
}

// ---------------------------------------------------------------- registry

TEST(SchemaRegistry, HasEveryContractSchema) {
  std::vector<std::string> names = Registry().Names();
  for (const char* want : {"tool_request", "tool_result", "result", "approval_response", "event"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (std::string_view type : kEventTypes) {
    const std::string want = "event_data." + std::string(type);
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(&SchemaRegistry::Builtin(), &Registry());
}

TEST(SchemaRegistry, UnknownSchemaNameIsNotFound) {
  Status s = Registry().Validate("no_such_schema", Json::object());
  EXPECT_EQ(s.code(), errc::kNotFound);
  EXPECT_NE(s.message().find("no_such_schema"), std::string::npos);
}

// Found by fuzz_policy: a string that is not UTF-8 (possible in a YAML
// policy; JSON text is checked by the parser) reached valijson's length
// check, which indexes a table out of bounds. It is refused first.
TEST(SchemaRegistry, AStringThatIsNotUtf8IsRefusedBeforeItsLengthIsMeasured) {
  Json policy = {{"version", 1},
                 {"agents",
                  {{"a1",
                    {{"allow",
                      {std::string("read_file:\x87\x87"
                                   "docs/**")}}}}}}};
  Status s = Registry().Validate("policy", policy);
  EXPECT_EQ(s.code(), errc::kInvalidUtf8) << s.message();
  EXPECT_NE(s.message().find("/agents/a1/allow/0"), std::string::npos) << s.message();
  Json key = {{std::string("\xff"), 1}};
  EXPECT_EQ(Registry().Validate("policy", key).code(), errc::kInvalidUtf8);
  Json fine = {{"text", "h\xc3\xa9llo \xf0\x9f\x98\x80"}};
  EXPECT_NE(Registry().Validate("tool_result", fine).code(), errc::kInvalidUtf8);
}

TEST(SchemaRegistry, IsSafeToUseFromManyThreads) {
  const Json good = {
      {"org_id", "o"}, {"agent_id", "a"}, {"session_id", "s"}, {"tool", "echo"}, {"args", Json::object()}};
  const Json bad = With(good, "/args", "x");
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (!Registry().Validate("tool_request", good).ok()) ++wrong;
        if (Registry().Validate("tool_request", bad).message() != "/args: expected object, got string")
          ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// ------------------------------------------------------------ tool_request

Json GoodRequest() {
  return Json::parse(R"({"request_id": "r-1", "org_id": "acme", "agent_id": "agent-7", "session_id": "s-1",
                         "tool": "cli:code-search", "action": "search", "args": {"query": "TODO", "n": 3},
                         "estimated_cost_usd": 0.25, "metadata": {"trace_id": "t-1", "anything": [1, 2]}})");
}

TEST(ToolRequestSchema, AcceptsFullAndMinimalRequests) {
  EXPECT_TRUE(Accepted("tool_request", GoodRequest()));
  Json minimal = GoodRequest();
  for (const char* opt : {"/request_id", "/action", "/estimated_cost_usd", "/metadata"})
    minimal = Without(minimal, opt);
  EXPECT_TRUE(Accepted("tool_request", minimal));
  EXPECT_TRUE(Accepted("tool_request", With(GoodRequest(), "/args", Json::object())));
  EXPECT_TRUE(Accepted("tool_request", With(GoodRequest(), "/estimated_cost_usd", 0)));
  EXPECT_TRUE(Accepted("tool_request", With(GoodRequest(), "/agent_id", "agent-é-日本")));
  EXPECT_TRUE(Accepted("tool_request", With(GoodRequest(), "/session_id", std::string(256, 's'))));
}

TEST(ToolRequestSchema, WrongTypesNameTheField) {
  EXPECT_EQ(MessageOf("tool_request", With(GoodRequest(), "/args", "text")),
            "/args: expected object, got string");
  EXPECT_EQ(MessageOf("tool_request", With(GoodRequest(), "/request_id", 7)),
            "/request_id: expected string, got integer");
  EXPECT_EQ(MessageOf("tool_request", With(GoodRequest(), "/estimated_cost_usd", "1")),
            "/estimated_cost_usd: expected number, got string");
  EXPECT_TRUE(
      Refused("tool_request", With(GoodRequest(), "/metadata", Json::array()), "/metadata: expected object"));
  EXPECT_TRUE(
      Refused("tool_request", With(GoodRequest(), "/tool", nullptr), "/tool: expected string, got null"));
  EXPECT_EQ(MessageOf("tool_request", Json::array()), "expected object, got array");
}

TEST(ToolRequestSchema, MissingRequiredFields) {
  EXPECT_EQ(MessageOf("tool_request", Without(GoodRequest(), "/tool")), "missing required field 'tool'");
  for (const char* field : {"org_id", "agent_id", "session_id", "args"}) {
    EXPECT_TRUE(Refused("tool_request", Without(GoodRequest(), std::string("/") + field),
                        std::string("missing required field '") + field + "'"));
  }
}

TEST(ToolRequestSchema, RefusesUnknownTopLevelFields) {
  EXPECT_EQ(MessageOf("tool_request", With(GoodRequest(), "/priority", 1)), "unknown field 'priority'");
  // metadata is the place for extensions.
  EXPECT_TRUE(Accepted("tool_request", With(GoodRequest(), "/metadata/priority", 1)));
}

TEST(ToolRequestSchema, IdsAreBoundedAndPrintable) {
  EXPECT_EQ(MessageOf("tool_request", With(GoodRequest(), "/org_id", "")), "/org_id: must not be empty");
  EXPECT_TRUE(Refused("tool_request", With(GoodRequest(), "/agent_id", "a\nb"), "/agent_id: must be an id"));
  EXPECT_TRUE(
      Refused("tool_request", With(GoodRequest(), "/session_id", std::string("a\0b", 3)), "/session_id"));
  EXPECT_TRUE(Refused("tool_request", With(GoodRequest(), "/tool", "del\x7f"), "/tool"));
  EXPECT_TRUE(
      Refused("tool_request", With(GoodRequest(), "/session_id", std::string(257, 's')), "/session_id"));
  // 100 three-byte characters: 100 characters but 300 bytes, over the
  // byte limit of the log's index keys.
  std::string wide;
  for (int i = 0; i < 100; ++i) wide += "日";
  EXPECT_TRUE(Refused("tool_request", With(GoodRequest(), "/request_id", wide), "/request_id"));
  // A huge value is refused, not a crash in the regex engine.
  EXPECT_TRUE(Refused("tool_request", With(GoodRequest(), "/tool", std::string(1 << 20, 't')), "/tool"));
}

TEST(ToolRequestSchema, CostMustNotBeNegative) {
  EXPECT_EQ(MessageOf("tool_request", With(GoodRequest(), "/estimated_cost_usd", -0.5)),
            "/estimated_cost_usd: must be >= 0");
}

// ------------------------------------------------------------- tool_result

Json GoodToolResult() {
  return Json::parse(
      R"({"success": true, "data": {"echo": "hi"}, "error": null, "meta": {"duration_ms": 1.5}})");
}

Json FailedToolResult() {
  return Json::parse(R"({"success": false, "data": null,
                         "error": {"code": "E_TOOL_EXEC", "message": "boom", "recoverable": false},
                         "meta": {"duration_ms": 0, "attempts": 2}})");
}

TEST(ToolResultSchema, AcceptsSuccessAndFailure) {
  EXPECT_TRUE(Accepted("tool_result", GoodToolResult()));
  EXPECT_TRUE(Accepted("tool_result", FailedToolResult()));
  for (Json data : {Json("text"), Json(42), Json::array({1, 2}), Json(nullptr)}) {
    EXPECT_TRUE(Accepted("tool_result", With(GoodToolResult(), "/data", data)));
  }
  // What execute builds conforms.
  EXPECT_TRUE(Accepted("tool_result", ToolResultOk({{"k", "v"}}, 3.5)));
  EXPECT_TRUE(Accepted("tool_result", ToolResultError(errc::kToolExec, "failed", true, 2)));
}

TEST(ToolResultSchema, RefusesBadShapes) {
  EXPECT_EQ(MessageOf("tool_result", With(GoodToolResult(), "/success", "yes")),
            "/success: expected boolean, got string");
  EXPECT_EQ(MessageOf("tool_result", With(GoodToolResult(), "/error", "oops")),
            "/error: expected object or null, got string");
  EXPECT_TRUE(Refused("tool_result", With(FailedToolResult(), "/error/code", "tool_exec"),
                      "/error/code: must be a stable error code"));
  EXPECT_TRUE(
      Refused("tool_result", With(FailedToolResult(), "/error/recoverable", "no"), "/error/recoverable"));
  EXPECT_EQ(MessageOf("tool_result", Without(FailedToolResult(), "/error/recoverable")),
            "/error: missing required field 'recoverable'");
  EXPECT_EQ(MessageOf("tool_result", Without(GoodToolResult(), "/data")), "missing required field 'data'");
  EXPECT_EQ(MessageOf("tool_result", Without(GoodToolResult(), "/meta/duration_ms")),
            "/meta: missing required field 'duration_ms'");
  EXPECT_EQ(MessageOf("tool_result", With(GoodToolResult(), "/meta/duration_ms", -1)),
            "/meta/duration_ms: must be >= 0");
  EXPECT_EQ(MessageOf("tool_result", With(GoodToolResult(), "/extra", true)), "unknown field 'extra'");
}

// ------------------------------------------------------------------ result

Json GoodResult() {
  Json r = Json::parse(R"({"request_id": "r-1", "org_id": "acme", "agent_id": "agent-7", "session_id": "s-1",
                           "tool": "echo", "status": "completed",
                           "decision": {"verdict": "allow", "reason": "SAFE built-in", "rule": "safe-builtins",
                                        "policy_version": "v1", "danger_level": "SAFE"},
                           "log_seq": 42})");
  r["result"] = GoodToolResult();
  return r;
}

TEST(ResultSchema, AcceptsEveryOutcome) {
  EXPECT_TRUE(Accepted("result", GoodResult()));
  Json failed = With(With(GoodResult(), "/status", "failed"), "/result", FailedToolResult());
  EXPECT_TRUE(Accepted("result", failed));
  Json denied = With(failed, "/status", "denied");
  denied["decision"]["verdict"] = "ask";
  denied["approval"] = {{"approver", "alice"}, {"scope", "once"}, {"comment", "no"}};
  EXPECT_TRUE(Accepted("result", denied));
  Json expired = With(failed, "/status", "expired");
  expired["approval"] = {{"deadline", kTime}};
  EXPECT_TRUE(Accepted("result", expired));
  // Rejected before a decision, naming no tool.
  Json rejected = With(With(With(failed, "/status", "rejected"), "/decision", nullptr), "/tool", "");
  EXPECT_TRUE(Accepted("result", With(rejected, "/log_seq", 0)));
}

TEST(ResultSchema, WhatTheStagesBuildConforms) {
  const Json request = {{"request_id", "r-9"}, {"org_id", "o"},  {"agent_id", "a"},
                        {"session_id", "s"},   {"tool", "echo"}, {"args", Json::object()}};
  const Json decision = {
      {"verdict", "deny"},      {"reason", "no"},         {"rule", "r"},
      {"danger_level", "HIGH"}, {"policy_version", "v1"}, {"error_code", errc::kPolicyDenied}};
  EXPECT_TRUE(Accepted("result", MakeResult(request, "completed", decision, nullptr, ToolResultOk("x", 1))));
  EXPECT_TRUE(Accepted("result", MakeResult(request, "rejected", nullptr, nullptr,
                                            ToolResultError(errc::kInvalidRequest, "bad", false))));
}

TEST(ResultSchema, RefusesBadShapes) {
  EXPECT_TRUE(
      Refused("result", With(GoodResult(), "/status", "done"), "/status: must be one of \"completed\""));
  EXPECT_TRUE(Refused("result", With(GoodResult(), "/decision/verdict", "maybe"),
                      "/decision/verdict: must be one of"));
  EXPECT_TRUE(
      Refused("result", With(GoodResult(), "/decision/danger_level", "EXTREME"), "/decision/danger_level"));
  EXPECT_EQ(MessageOf("result", Without(GoodResult(), "/decision/rule")),
            "/decision: missing required field 'rule'");
  EXPECT_EQ(MessageOf("result", With(GoodResult(), "/decision", "allow")),
            "/decision: expected object or null, got string");
  EXPECT_EQ(MessageOf("result", Without(GoodResult(), "/request_id")), "missing required field 'request_id'");
  EXPECT_EQ(MessageOf("result", With(GoodResult(), "/log_seq", -1)), "/log_seq: must be >= 0");
  EXPECT_EQ(MessageOf("result", With(GoodResult(), "/log_seq", 1.5)),
            "/log_seq: expected integer, got number");
  EXPECT_EQ(MessageOf("result", With(GoodResult(), "/result/meta", 3)),
            "/result/meta: expected object, got integer");
  EXPECT_TRUE(Refused(
      "result",
      With(GoodResult(), "/result/error", Json{{"code", "X"}, {"message", "m"}, {"recoverable", true}}),
      "/result/error/code"));
  EXPECT_TRUE(
      Refused("result", With(GoodResult(), "/approval", Json{{"scope", "forever"}}), "/approval/scope"));
  EXPECT_EQ(MessageOf("result", With(GoodResult(), "/trace", "t")), "unknown field 'trace'");
}

// ------------------------------------------------------- approval_response

Json GoodApproval() {
  return {{"request_id", "r-1"}, {"decision", "approve"},   {"approver", "alice@example.com"},
          {"scope", "once"},     {"comment", "looks fine"}, {"args_hash", kHash}};
}

TEST(ApprovalResponseSchema, AcceptsApproveAndDeny) {
  EXPECT_TRUE(Accepted("approval_response", GoodApproval()));
  Json deny = With(With(GoodApproval(), "/decision", "deny"), "/scope", "always");
  EXPECT_TRUE(Accepted("approval_response", Without(deny, "/comment")));
  // The signature says who answers (docs/trust.md): approver is optional;
  // a deployment-wide admin names the request's org.
  EXPECT_TRUE(Accepted("approval_response", Without(GoodApproval(), "/approver")));
  EXPECT_TRUE(Accepted("approval_response", With(GoodApproval(), "/org_id", "acme")));
}

TEST(ApprovalResponseSchema, RefusesBadShapes) {
  EXPECT_EQ(MessageOf("approval_response", With(GoodApproval(), "/decision", "maybe")),
            "/decision: must be one of \"approve\", \"deny\", \"withdraw\"");
  EXPECT_EQ(MessageOf("approval_response", With(GoodApproval(), "/scope", "forever")),
            "/scope: must be one of \"once\", \"always\"");
  EXPECT_TRUE(Refused("approval_response", With(GoodApproval(), "/args_hash", std::string(64, 'A')),
                      "/args_hash: must be a SHA-256 digest as 64 lowercase hex digits"));
  EXPECT_TRUE(Refused("approval_response", With(GoodApproval(), "/args_hash", "abc"), "/args_hash"));
  EXPECT_TRUE(Refused("approval_response", With(GoodApproval(), "/approver", ""), "/approver"));
  EXPECT_TRUE(Refused("approval_response", With(GoodApproval(), "/org_id", 7), "/org_id"));
  EXPECT_EQ(MessageOf("approval_response", Without(GoodApproval(), "/decision")),
            "missing required field 'decision'");
  EXPECT_EQ(MessageOf("approval_response", Without(GoodApproval(), "/args_hash")),
            "missing required field 'args_hash'");
  EXPECT_EQ(MessageOf("approval_response", With(GoodApproval(), "/comment", 5)),
            "/comment: expected string, got integer");
  EXPECT_EQ(MessageOf("approval_response", With(GoodApproval(), "/approved", true)),
            "unknown field 'approved'");
  // A withdrawal needs neither scope nor args_hash; an approval needs both.
  Json withdraw{{"request_id", "r1"}, {"decision", "withdraw"}};
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("approval_response", withdraw).ok());
  EXPECT_EQ(MessageOf("approval_response", Without(GoodApproval(), "/scope")),
            "missing required field 'scope'");
}

// ------------------------------------------------------------------ events

// A credential as `tollgate agents add` registers it (RFC 8037's example key).
Credential GoodCredential() {
  Credential c;
  c.kind = "agent_key";
  c.identity = "agent-7";
  c.org_id = "acme";
  c.roles = {"agent"};
  c.public_key = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
  c.key_id = KeyIdOfPublicKey(c.public_key);
  c.added_by = "admin";
  return c;
}

// The data of a good event of each type.
Json GoodData(std::string_view type) {
  if (type == "request.received") {
    Json request = Without(GoodRequest(), "/metadata");
    request["args"] = {{"query", "TODO"}, {"api_key", "[REDACTED]"}};
    return {{"request", request},
            {"args_hash", kHash},
            {"content_hash", kHash},
            {"received_at", kTime},
            {"source", "tollgate.requests/0/17"},
            {"redacted", {"/args/api_key"}}};
  }
  if (type == "request.rejected") {
    return {{"error", {{"code", "E_INVALID_REQUEST"}, {"message", "/args: expected object, got string"}}},
            {"source", "tollgate.requests/0/18"},
            {"size_bytes", 120}};
  }
  if (type == "decision.made") {
    return {{"verdict", "ask"},
            {"reason", "writes files"},
            {"rule", "writes-need-approval"},
            {"danger_level", "MEDIUM"},
            {"policy_version", "v3"},
            {"reservation", {{"usd", 0.25}}},
            {"invocation", "builtin:write_file"},
            {"read_only", false},
            {"checks", {{{"check", "registry"}, {"result", "pass"}, {"detail", "MEDIUM, mutating"}}}},
            {"approval", {{"quorum", 2}, {"approvers", {"alice", "bob"}}, {"timeout_s", 900}}}};
  }
  if (type == "approval.requested")
    return {{"approvers_needed", 2}, {"deadline", kTime}, {"args_hash", kHash}};
  if (type == "approval.granted") return {{"approver", "alice"}, {"scope", "always"}, {"comment", "ok"}};
  if (type == "approval.denied") return {{"approver", "system"}, {"scope", "once"}};
  if (type == "approval.expired") return {{"deadline", "2026-11-22T11:40:24+01:00"}};
  if (type == "approval.refused") {
    return {{"code", "E_ARGS_HASH_MISMATCH"},
            {"message", "args_hash does not match"},
            {"approver", "alice"},
            {"decision", "approve"},
            {"scope", "once"},
            {"args_hash", kHash},
            {"source", "x/0/3"}};
  }
  if (type == "execution.started") return {{"executor", "builtin"}, {"attempt", 1}, {"source", "x/0/1"}};
  if (type == "execution.completed") {
    return {
        {"result", FailedToolResult()}, {"duration_ms", 12.5}, {"cost_usd", 0}, {"redacted", Json::array()}};
  }
  if (type == "policy.updated") {
    return {{"policy_version", "v4"},
            {"content_hash", kHash},
            {"source", "policies/default.yaml"},
            {"tier", "file"},
            {"policy", {{"mode", "ask"}}}};
  }
  if (type == "tools.available")
    return {{"executor", "host-1:/srv/tollgate/tools"}, {"cli", {"code-search", "gpu-train"}}};
  if (type == "policy.refused") {
    return {{"source", "policies/default.yaml"},
            {"file_sha256", kHash},
            {"errors", Json::array({{{"line", 2}, {"column", 1}, {"message", "unknown field 'bogus'"}}})},
            {"errors_total", 1},
            {"in_force_version", "file:0123456789abcdef"},
            {"in_force_content_hash", kHash}};
  }
  if (type == "checkpoint.signed") {
    return {{"origin", "tollgate/0123456789abcdef"},
            {"size", 42},
            {"root", "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="},
            {"note",
             "tollgate/0123456789abcdef\n42\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n\u2014 sig\n"}};
  }
  if (type == "credential.added") return CredentialAddedEvent(GoodCredential(), 1795862424123456).data;
  if (type == "credential.revoked") {
    return CredentialRevokedEvent(GoodCredential(), "admin", "key leaked", 1795862424123456).data;
  }
  ADD_FAILURE() << "no example for " << type;
  return Json::object();
}

// A good event body of `type`, built the way the stages build them.
Json GoodEvent(std::string_view type) {
  if (type == "credential.added") return CredentialAddedEvent(GoodCredential(), 1795862424123456).BodyJson();
  if (type == "credential.revoked") {
    return CredentialRevokedEvent(GoodCredential(), "admin", "key leaked", 1795862424123456).BodyJson();
  }
  Event e;
  e.type = std::string(type);
  const bool deployment_wide = type == "policy.updated" || type == "tools.available" ||
                               type == "policy.refused" || type == "checkpoint.signed";
  e.request_id = deployment_wide ? "" : "r-1";
  e.id = e.request_id.empty() ? MakeEventId(e.type, "") : MakeRequestEventId("acme", e.type, e.request_id);
  e.time_us = 1795862424123456;
  e.org_id = "acme";
  if (!deployment_wide) {
    e.agent_id = "agent-7";
    e.session_id = "s-1";
    e.tool = "echo";
  }
  e.data = GoodData(type);
  return e.BodyJson();
}

Status CheckEvent(const Json& event) { return Registry().ValidateEvent(event); }

TEST(EventSchema, AcceptsAGoodEventOfEveryType) {
  for (std::string_view type : kEventTypes) {
    Json event = GoodEvent(type);
    EXPECT_TRUE(CheckEvent(event).ok()) << type << ": " << CheckEvent(event).ToString();
    // Stages may add data fields later; credential events hold exactly
    // their fields (never a private key or a token).
    const bool strict = type.starts_with("credential.");
    EXPECT_EQ(CheckEvent(With(event, "/data/added_later", {1, 2})).ok(), !strict) << type;
    // As a full record, with what the log assigns.
    Json record = With(With(With(event, "/seq", 7), "/prev_hash", std::string(64, '0')), "/hash", kHash);
    EXPECT_TRUE(CheckEvent(record).ok()) << type << ": " << CheckEvent(record).ToString();
  }
}

TEST(EventSchema, UnknownTypeHasItsOwnCode) {
  Status s = CheckEvent(With(GoodEvent("decision.made"), "/type", "request.exploded"));
  EXPECT_EQ(s.code(), errc::kUnknownEventType);
  EXPECT_NE(s.message().find("request.exploded"), std::string::npos);
}

TEST(EventSchema, RefusesBadEnvelopes) {
  const Json good = GoodEvent("execution.started");
  struct Case {
    Json event;
    std::string message;
  };
  const Case cases[] = {
      {With(good, "/origin", "x"), "unknown field 'origin'"},
      {Without(good, "/time"), "missing required field 'time'"},
      {Without(good, "/type"), "missing required field 'type'"},
      {With(good, "/type", 5), "/type: expected string, got integer"},
      {With(good, "/type", ""), "/type: must be one of \"request.received\""},
      {With(good, "/time", "2026-13-01T00:00:00Z"), "/time: must be an RFC 3339 timestamp"},
      {With(good, "/time", "2026-11-22 10:40:24Z"), "/time: must be an RFC 3339 timestamp"},
      {With(good, "/time", 1795862424), "/time: expected string, got integer"},
      {With(good, "/seq", -1), "/seq: must be >= 0"},
      {With(good, "/seq", "1"), "/seq: expected integer, got string"},
      {With(good, "/hash", "ABC"), "/hash: must be a SHA-256 digest"},
      {With(good, "/prev_hash", std::string(63, 'a')), "/prev_hash: must be a SHA-256 digest"},
      {With(good, "/data", Json::array()), "/data: expected object, got array"},
      {With(good, "/org_id", ""), "/org_id: must not be empty"},
      {With(good, "/request_id", ""), "/request_id: must not be empty"},
      {With(good, "/agent_id", "a\tb"), "/agent_id: must be"},
      {With(good, "/session_id", nullptr), "/session_id: expected string, got null"},
  };
  for (const Case& c : cases) {
    Status s = CheckEvent(c.event);
    EXPECT_EQ(s.code(), errc::kSchemaViolation) << c.event.dump();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message() << " vs " << c.message;
  }
  EXPECT_EQ(CheckEvent(Json::array()).code(), errc::kSchemaViolation);
}

TEST(EventSchema, OnlyPolicyUpdatedMayLackARequest) {
  Json policy = GoodEvent("policy.updated");
  EXPECT_EQ(policy["request_id"], "");
  EXPECT_TRUE(CheckEvent(policy).ok()) << CheckEvent(policy).ToString();
  Json other = With(With(With(policy, "/type", "decision.made"), "/data", GoodData("decision.made")),
                    "/agent_id", "a");
  other["session_id"] = "s";
  EXPECT_EQ(CheckEvent(other).message(), "/request_id: must not be empty");
}

TEST(EventSchema, TimesFollowRfc3339) {
  const Json good = GoodEvent("approval.expired");
  for (const char* t : {"2026-11-22T10:40:24Z", "2026-11-22t10:40:24z", "2026-11-22T10:40:24.1Z",
                        "2026-11-22T10:40:24.123456789-05:30", "2016-12-31T23:59:60Z"}) {
    EXPECT_TRUE(CheckEvent(With(good, "/time", t)).ok()) << t;
    int64_t us;
    EXPECT_TRUE(ParseTime(t, &us)) << t;  // the schema accepts what the log accepts
  }
  for (const char* t : {"2026-11-22T10:40:24", "2026-11-22T24:00:00Z", "2026-11-22T10:40:24.Z",
                        "2026-11-22T10:40:24.1234567890Z", "2026-11-32T10:40:24Z", "22-11-2026T10:40:24Z",
                        "2026-11-22T10:40:24Z "}) {
    EXPECT_EQ(CheckEvent(With(good, "/time", t)).code(), errc::kSchemaViolation) << t;
  }
}

// Bad data for each type: the pointer is relative to the event ("/data/...").
TEST(EventDataSchema, RefusesBadDataOfEveryType) {
  struct Case {
    const char* type;
    const char* ptr;  // inside data
    Json value;       // null with erase = true removes the member
    bool erase;
    const char* message;
  };
  const Case cases[] = {
      {"request.received", "/args_hash", nullptr, true, "/data: missing required field 'args_hash'"},
      {"request.received", "/args_hash", "nothex", false, "/data/args_hash: must be a SHA-256 digest"},
      {"request.received", "/request/args", "x", false, "/data/request/args: expected object, got string"},
      {"request.received", "/request/request_id", nullptr, true,
       "/data/request: missing required field 'request_id'"},
      {"request.received", "/request/surprise", 1, false, "/data/request: unknown field 'surprise'"},
      {"request.received", "/received_at", "yesterday", false,
       "/data/received_at: must be an RFC 3339 timestamp"},
      {"request.received", "/redacted", "all", false, "/data/redacted: expected array, got string"},
      {"request.rejected", "/error", nullptr, true, "/data: missing required field 'error'"},
      {"request.rejected", "/error/code", "bad", false, "/data/error/code: must be a stable error code"},
      {"request.rejected", "/error/message", nullptr, true, "/data/error: missing required field 'message'"},
      {"request.rejected", "/size_bytes", -1, false, "/data/size_bytes: must be >= 0"},
      {"decision.made", "/verdict", "maybe", false,
       "/data/verdict: must be one of \"allow\", \"deny\", \"ask\""},
      {"decision.made", "/danger_level", "EXTREME", false, "/data/danger_level: must be one of \"SAFE\""},
      {"decision.made", "/reservation", "x", false, "/data/reservation: expected object, got string"},
      {"decision.made", "/policy_version", nullptr, true, "/data: missing required field 'policy_version'"},
      {"decision.made", "/rule", 3, false, "/data/rule: expected string, got integer"},
      {"decision.made", "/approval", nullptr, true, "approval"},
      {"decision.made", "/approval/quorum", 0, false, "/data/approval/quorum: must be >= 1"},
      {"decision.made", "/read_only", "yes", false, "/data/read_only: expected boolean, got string"},
      {"approval.requested", "/approvers_needed", 0, false, "/data/approvers_needed: must be >= 1"},
      {"approval.requested", "/approvers_needed", "2", false,
       "/data/approvers_needed: expected integer, got string"},
      {"approval.requested", "/deadline", nullptr, true, "/data: missing required field 'deadline'"},
      {"approval.requested", "/args_hash", nullptr, true, "/data: missing required field 'args_hash'"},
      {"approval.granted", "/scope", "forever", false, "/data/scope: must be one of \"once\", \"always\""},
      {"approval.granted", "/approver", nullptr, true, "/data: missing required field 'approver'"},
      {"approval.denied", "/approver", "", false, "/data/approver: must not be empty"},
      {"approval.denied", "/comment", 5, false, "/data/comment: expected string, got integer"},
      {"approval.expired", "/deadline", nullptr, true, "/data: missing required field 'deadline'"},
      {"approval.expired", "/deadline", 123, false, "/data/deadline: expected string, got integer"},
      {"approval.refused", "/code", nullptr, true, "/data: missing required field 'code'"},
      {"approval.refused", "/code", "args mismatch", false, "/data/code: must be a stable error code"},
      {"approval.requested", "/approvers", "alice", false, "/data/approvers: expected array, got string"},
      {"execution.started", "/attempt", 0, false, "/data/attempt: must be >= 1"},
      {"execution.started", "/attempt", 1.5, false, "/data/attempt: expected integer, got number"},
      {"execution.started", "/executor", nullptr, true, "/data: missing required field 'executor'"},
      {"execution.completed", "/result/success", nullptr, true,
       "/data/result: missing required field 'success'"},
      {"execution.completed", "/result/error/code", "E_lower", false, "/data/result/error/code"},
      {"execution.completed", "/duration_ms", -1, false, "/data/duration_ms: must be >= 0"},
      {"execution.completed", "/cost_usd", "free", false, "/data/cost_usd: expected number, got string"},
      {"policy.updated", "/content_hash", "abc", false, "/data/content_hash: must be a SHA-256 digest"},
      {"policy.updated", "/source", nullptr, true, "/data: missing required field 'source'"},
      {"tools.available", "/executor", nullptr, true, "/data: missing required field 'executor'"},
      {"policy.refused", "/errors", Json::array(), false, "/data/errors"},
      {"checkpoint.signed", "/root", "not base64", false, "/data/root"},
      {"policy.updated", "/policy_version", "", false, "/data/policy_version: must not be empty"},
      {"policy.updated", "/policy", nullptr, true, "policy"},
      {"policy.updated", "/tier", "org", false, "/data/tier: must be one of"},
      {"credential.added", "/kind", "password", false, "/data/kind: must be one of"},
      {"credential.added", "/key_id", "XYZ", false, "/data/key_id"},
      {"credential.added", "/public_key", "short", false, "/data/public_key"},
      {"credential.added", "/roles", Json::array({"root"}), false, "/data/roles/0: must be one of"},
      {"credential.added", "/added_by", nullptr, true, "/data: missing required field 'added_by'"},
      {"credential.added", "/private_key", "-----BEGIN PRIVATE KEY-----", false,
       "unknown field 'private_key'"},
      {"credential.revoked", "/revoked_by", nullptr, true, "/data: missing required field 'revoked_by'"},
      {"credential.revoked", "/key_id", nullptr, true, "/data: missing required field 'key_id'"},
      {"credential.revoked", "/token", "t0ken", false, "unknown field 'token'"},
  };
  std::vector<std::string> covered;
  for (const Case& c : cases) {
    Json event = GoodEvent(c.type);
    event = c.erase ? Without(event, std::string("/data") + c.ptr)
                    : With(event, std::string("/data") + c.ptr, c.value);
    Status s = CheckEvent(event);
    EXPECT_EQ(s.code(), errc::kSchemaViolation) << c.type << c.ptr << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos)
        << c.type << c.ptr << ": got '" << s.message() << "', want '" << c.message << "'";
    covered.push_back(c.type);
  }
  for (std::string_view type : kEventTypes) {
    EXPECT_NE(std::find(covered.begin(), covered.end(), type), covered.end()) << "no bad case for " << type;
  }
}

TEST(EventDataSchema, DataSchemasAreUsableAlone) {
  for (std::string_view type : kEventTypes) {
    EXPECT_TRUE(Accepted("event_data." + std::string(type), GoodData(type)));
    EXPECT_TRUE(Refused("event_data." + std::string(type), Json("text"), "expected object, got string"));
  }
}

}  // namespace
}  // namespace tollgate
