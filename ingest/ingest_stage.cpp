#include "ingest/ingest_stage.h"

#include "core/messages.h"
#include "core/redact.h"
#include "core/request_state.h"
#include "core/schedules.h"
#include "core/schema.h"
#include "core/sha256.h"
#include "core/tool_args.h"
#include "core/tool_catalog.h"
#include "core/trace.h"

namespace tollgate {
namespace {

constexpr const char* kUnknown = "unknown";

// `v` if it can stand in an event envelope, else "unknown": rejected input
// still needs an org, agent and session to be filed under.
std::string SafeId(const Json* v) {
  if (v == nullptr || !v->is_string()) return kUnknown;
  const std::string& s = v->get_ref<const std::string&>();
  if (s.empty() || s.size() > kMaxIdBytes) return kUnknown;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return kUnknown;
  }
  std::string canon;
  if (!CanonicalBytes(Json(s), &canon).ok()) return kUnknown;  // invalid UTF-8
  return s;
}

const Json* Field(const Json& j, const char* name) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

std::string DerivedRequestId(const std::string& source) { return "k-" + Sha256Hex(source).substr(0, 24); }

// The request's trace: the agent's traceparent header when well-formed,
// else a new trace of its own (docs/operations.md, "Trace context").
std::string TraceFor(const Message& in, const std::string& org_id, const std::string& request_id) {
  std::string tp = TraceparentOf(in);
  return tp.empty() ? NewTraceparent(org_id, request_id) : tp;
}

}  // namespace

StageResult IngestStage::Reject(const Message& in, const StageContext& ctx, const Json& partial,
                                const std::string& request_id, Rejection why) {
  // The signer is proven: the refusal is filed under it and its result goes
  // back to it.
  Json request{{"request_id", request_id},
               {"org_id", SafeId(Field(partial, "org_id"))},
               {"agent_id", SafeId(Field(partial, "agent_id"))},
               {"session_id", SafeId(Field(partial, "session_id"))},
               {"tool", SafeId(Field(partial, "tool"))}};
  if (request["tool"] == kUnknown) request["tool"] = "";
  Event e;
  e.type = "request.rejected";
  e.request_id = request_id;
  e.org_id = request["org_id"].get<std::string>();
  e.id = MakeRequestEventId(e.org_id, e.type, request_id, why.discriminator);
  e.time_us = ctx.now_us;
  e.agent_id = request["agent_id"].get<std::string>();
  e.session_id = request["session_id"].get<std::string>();
  e.tool = request["tool"].get<std::string>();
  // A refusal's message may quote what the sender sent: no secrets in it.
  (config_.redactor ? *config_.redactor->get() : *DefaultRedactor()).RedactString(&why.message);
  e.data = {{"error", {{"code", why.code}, {"message", why.message}}},
            {"source", ctx.source},
            {"size_bytes", in.value.size()}};
  if (why.extra.is_object()) e.data.update(why.extra);
  const std::string tp = TraceFor(in, e.org_id, request_id);
  StampTraceparent(tp, &e);
  StageResult r;
  r.events.push_back(std::move(e));
  Json result =
      MakeResult(request, "rejected", nullptr, nullptr, ToolResultError(why.code, why.message, false));
  Message out = MessageFor(config_.topics.results(), request, result);
  StampTraceparent(tp, &out);
  r.outputs.push_back({std::move(out), 0, std::move(result)});
  return r;
}

StageResult IngestStage::RejectUnproven(const Message& in, const StageContext& ctx, const Json& said,
                                        const std::string& request_id, const SignedBy& who) {
  const RefusalLimiter::Verdict verdict =
      refusals_.Admit(name(), who.code, who.check, ctx.source, in.value.size(), ctx.now_us);
  if (verdict != RefusalLimiter::Verdict::kLog) return {};  // counted: its summary accounts for it
  // What it claimed, for the auditor: filed under "unknown", never under it.
  Json claimed = Json::object();
  if (Json rid(request_id); SafeId(&rid) != kUnknown && request_id != DerivedRequestId(ctx.source)) {
    claimed["request_id"] = request_id;
  }
  const Json key(in.key);
  for (const char* k : {"org_id", "agent_id", "session_id", "tool"}) {
    const Json* v = Field(said, k);
    if (v == nullptr && std::string(k) == "agent_id") v = &key;
    const std::string id = SafeId(v);
    if (id != kUnknown) claimed[k] = id;
  }
  UnprovenRefusal why{name(), who.code, who.message,
                      Json{{"check", who.check}, {"claimed", std::move(claimed)}}};
  (config_.redactor ? *config_.redactor->get() : *DefaultRedactor()).RedactString(&why.message);
  return RefuseUnproven(config_.topics, in, ctx, why);
}

StageResult IngestStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  const std::string derived_id = DerivedRequestId(ctx.source);
  // What the sender says of itself, for a rejection's result; nothing here
  // is trusted before the signature is.
  Json doc;
  Status parsed = in.value.size() <= config_.max_request_bytes
                      ? ParseInputJson(in.value, &doc)
                      : Status::Error(errc::kRequestTooLarge, "not parsed");
  Json said = doc.is_object() ? doc : Json::object();

  // 1. Who sent it (docs/trust.md).
  SignedBy who;
  bool authed = config_.credentials != nullptr &&
                AuthenticateRequest(in, *config_.credentials, ctx.now_us, config_.max_skew_us, &who);
  if (config_.credentials == nullptr) {
    who.code = errc::kUnauthenticated;
    who.check = "registry";
    who.message = "this ingest has no agent registry: nothing is accepted";
  }
  if (!said.contains("org_id") && !who.claimed_org.empty()) said["org_id"] = who.claimed_org;
  if (!said.contains("agent_id") && !who.claimed_identity.empty()) said["agent_id"] = who.claimed_identity;
  std::string request_id = derived_id;
  if (const Json* rid = Field(said, "request_id"); rid && SafeId(rid) != kUnknown) {
    request_id = rid->get<std::string>();
  } else if (Json c(who.claimed_request_id); SafeId(&c) != kUnknown) {
    request_id = who.claimed_request_id;
  } else if (authed || who.signature_ok) {
    // Signed without an id: one from the signature, so a replayed copy of
    // the same signed message is the same request.
    request_id = "j-" + Sha256Hex(in.headers.at(kHeaderAuth)).substr(0, 24);
  }
  if (!authed && who.code == errc::kSignatureExpired && who.signature_ok) {
    // Read again after a crash, later than the skew: if this very message
    // was received, it was authenticated then.
    std::vector<Event> history;
    Status s = log.EventsOfRequest(who.claims.value("org_id", ""), request_id, &history);
    if (!s.ok()) {
      StageResult r;
      r.error = s;
      return r;
    }
    RequestState st = Summarize(history);
    authed = st.received != nullptr && SourceOf(st.received) == ctx.source;
    if (authed) {
      who.org_id = who.claims.value("org_id", "");
      who.identity = who.claims.value("agent_id", "");
    }
  }
  if (!authed && !who.signature_ok) return RejectUnproven(in, ctx, said, request_id, who);
  if (!authed) {
    // The signer is proven (only its time failed): filed under it.
    said["org_id"] = who.claims.value("org_id", "");
    said["agent_id"] = who.claims.value("agent_id", "");
    return Reject(in, ctx, said, request_id,
                  Rejection{who.code, who.message, ctx.source, Json{{"check", who.check}}});
  }
  said["org_id"] = who.org_id;
  said["agent_id"] = who.identity;
  auto reject = [&](const char* code, std::string message, const std::string& disc = "") {
    return Reject(in, ctx, said, request_id, Rejection{code, std::move(message), disc});
  };

  // 2. The message itself.
  if (in.value.size() > config_.max_request_bytes) {
    return reject(errc::kRequestTooLarge,
                  "request is " + std::to_string(in.value.size()) + " bytes; the limit is " +
                      std::to_string(config_.max_request_bytes),
                  ctx.source);
  }
  if (!parsed.ok()) {
    // A parse limit (depth, number range) keeps its own code; malformed
    // JSON is an invalid request.
    const char* code = parsed.code() == errc::kInvalidJson ? errc::kInvalidRequest : parsed.code().c_str();
    return reject(code, "request is not JSON: " + parsed.message(), ctx.source);
  }
  if (!doc.is_object()) return reject(errc::kInvalidRequest, "request must be a JSON object", ctx.source);
  Status s = SchemaRegistry::Builtin().Validate("tool_request", doc);
  if (!s.ok()) return reject(errc::kInvalidRequest, s.message(), ctx.source);
  // The body speaks for the signer only: the identity it names must be the
  // signed one, and so must its request_id.
  if (doc["org_id"] != who.org_id || doc["agent_id"] != who.identity ||
      (!who.claimed_request_id.empty() &&
       doc.value("request_id", who.claimed_request_id) != who.claimed_request_id)) {
    Rejection why{errc::kUnauthenticated,
                  "the request names org '" + doc["org_id"].get<std::string>() + "', agent '" +
                      doc["agent_id"].get<std::string>() + "' or a request_id other than its signature's",
                  ctx.source, Json{{"check", "claims"}}};
    return Reject(in, ctx, said, request_id, std::move(why));
  }
  // A scheduled call (core/schedules.h) is believed only as far as the log
  // bears it out: the successful create of that schedule, same call.
  if (ClaimsScheduled(doc, request_id)) {
    std::vector<Event> create;
    if (const std::string rid = CreateRequestNamedBy(doc); !rid.empty()) {
      if (Status read = log.EventsOfRequest(who.org_id, rid, &create); !read.ok()) {
        StageResult r;
        r.error = read;
        return r;
      }
    }
    if (Status ok = CheckScheduledRequest(doc, request_id, create, ctx.now_us); !ok.ok()) {
      return reject(ok.code().c_str(), ok.message(), ctx.source);
    }
  }

  // 3. The tool's name as tollgate knows it: Kaizen's mcp__kaizen_builtin__X
  // is the built-in X from here on (core/tool_catalog.h, CanonicalToolName),
  // so decide, execute, the log and replay see one name; the name the agent
  // used is kept in request.received's `tool_called`.
  const std::string tool_called = doc["tool"].get<std::string>();
  doc["tool"] = std::string(CanonicalToolName(tool_called));
  // The request's own `action` and args.action name one action: a tool that
  // takes it as an argument (Duragent's) gets it there, and two that
  // differ are refused, so decide and execute see one (core/invocation.h).
  if (doc.contains("action") && doc["action"].is_string() && doc["args"].is_object()) {
    const Json& act = doc["action"];
    if (doc["args"].contains("action") && doc["args"]["action"] != act) {
      return reject(errc::kInvalidArgs, "the request's action and args.action differ", ctx.source);
    }
    if (ToolTakesAction(doc["tool"].get<std::string>())) doc["args"]["action"] = act;
  }
  // Its contract: its args fit its schema (core/tool_args.h).
  s = CheckToolArgs(doc["tool"].get<std::string>(), doc["args"]);
  if (!s.ok()) return reject(s.code().c_str(), s.message(), ctx.source);

  // The normalised request: the contract's fields, request_id filled in.
  Json request{{"request_id", request_id},        {"org_id", doc["org_id"]}, {"agent_id", doc["agent_id"]},
               {"session_id", doc["session_id"]}, {"tool", doc["tool"]},     {"args", doc["args"]}};
  for (const char* opt : {"action", "estimated_cost_usd", "metadata"}) {
    if (doc.contains(opt)) request[opt] = doc[opt];
  }
  const std::string args_hash = ArgsHash(request["args"]);
  std::string canon;
  s = CanonicalBytes(request, &canon);
  if (!s.ok()) return reject(errc::kInvalidRequest, s.message(), ctx.source);
  const std::string content_hash = Sha256Hex(canon);

  // 4. Seen before? De-duplication by request_id, from the log (the header).
  std::vector<Event> history;
  s = log.EventsOfRequest(request["org_id"], request_id, &history);
  if (!s.ok()) {
    // The log cannot be read: fail closed (the runner retries) rather than
    // risk a second execution.
    StageResult r;
    r.error = s;
    return r;
  }
  RequestState state = Summarize(history);
  if (state.received != nullptr) {
    if (state.received->data.value("content_hash", "") != content_hash) {
      return reject(errc::kDuplicateRequest,
                    "request_id '" + request_id + "' was already used for a different request", ctx.source);
    }
    StageResult r;
    // Whoever sent this copy, the request goes on in the trace it was received with.
    const std::string tp = TraceparentOf(*state.received);
    if (SourceOf(state.received) == ctx.source) {
      // Read again after a crash: forward exactly what was forwarded before.
      Flow flow{request, state.received->data.value("received_at", ""), args_hash, nullptr};
      r.outputs.push_back({MessageFor(config_.topics.decide(), request, flow.ToJson()), -1});
    }
    // An agent's retry: no second execution. A finished request gets its
    // recorded outcome again; one in flight gets nothing new (its result is
    // on its way).
    Json original = ResultFromLog(state);
    if (!original.is_null())
      r.outputs.push_back({MessageFor(config_.topics.results(), request, original), -1});
    for (StageOutput& o : r.outputs) StampTraceparent(tp, &o.message);
    return r;
  }
  // A request rejected before under this id (say, invalid then fixed) was
  // never received, so the id is still free.

  // 5. Received: secrets redacted by key and by value (docs/redaction.md);
  // the flow forwarded below keeps them for the executor, content_hash
  // covers them.
  Json logged = request;
  std::vector<std::string> redacted;
  const std::shared_ptr<const Redactor> redactor = config_.redactor ? config_.redactor->get() : nullptr;
  for (const char* part : {"args", "metadata"}) {
    if (logged.contains(part)) {
      const std::string at = std::string("/") + part;
      auto more = redactor ? redactor->Redact(logged[part], at)
                           : RedactSecrets(logged[part], config_.redact_key_patterns, at);
      redacted.insert(redacted.end(), more.begin(), more.end());
    }
  }
  const std::string received_at = FormatTime(ctx.now_us);
  Event e;
  e.type = "request.received";
  e.request_id = request_id;
  e.org_id = request["org_id"];
  e.id = MakeRequestEventId(e.org_id, e.type, request_id);
  e.time_us = ctx.now_us;
  e.agent_id = request["agent_id"];
  e.session_id = request["session_id"];
  e.tool = request["tool"];
  e.data = {{"request", logged},          {"args_hash", args_hash}, {"content_hash", content_hash},
            {"received_at", received_at}, {"source", ctx.source},   {"redacted", redacted},
            {"signed_by", who.key_id}};
  if (!who.via.empty()) e.data["via"] = who.via;
  if (tool_called != request["tool"]) e.data["tool_called"] = tool_called;
  const std::string tp = TraceFor(in, e.org_id, request_id);
  StampTraceparent(tp, &e);
  StageResult r;
  r.events.push_back(std::move(e));
  Flow flow{request, received_at, args_hash, nullptr};
  r.outputs.push_back({MessageFor(config_.topics.decide(), request, flow.ToJson()), -1});
  StampTraceparent(tp, &r.outputs.back().message);
  return r;
}

}  // namespace tollgate
