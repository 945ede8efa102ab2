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
  // A refusal's message may quote what the sender sent: no secrets in it.
  (config_.redactor ? *config_.redactor->get() : *DefaultRedactor()).RedactString(&why.message);
  Event e = RequestRejectedEvent(request, why.code, why.message, why.discriminator, ctx.source, ctx.now_us);
  e.data["size_bytes"] = in.value.size();
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
  if (Json rid(request_id); SafeId(&rid) != kUnknown && request_id != RequestIdOfSource(ctx.source)) {
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

// One message on its way through Process's steps.
struct IngestStage::Intake {
  Intake(const Message& in, const StageContext& ctx, const LogView& log) : in(in), ctx(ctx), log(log) {}
  const Message& in;
  const StageContext& ctx;
  const LogView& log;
  Json doc;  // the body as parsed (null when it is not JSON)
  Status parsed;
  // What the sender says of itself, for a rejection's result; nothing here
  // is trusted before the signature is.
  Json said;
  SignedBy who;
  std::string request_id;
};

// The request as the rest of the pipeline sees it, and what ingest logs of it.
struct IngestStage::Normalised {
  Json request;             // the contract's fields, request_id filled in
  std::string tool_called;  // the tool's name as the agent wrote it
  std::string args_hash, content_hash;
};

namespace {

// A message that cannot be processed for a reason outside it (the log
// cannot be read): the runner retries it.
StageResult Failed(Status s) {
  StageResult r;
  r.error = std::move(s);
  return r;
}

}  // namespace

StageResult IngestStage::Refuse(const Intake& m, const char* code, std::string message) {
  return Reject(m.in, m.ctx, m.said, m.request_id, Rejection{code, std::move(message), m.ctx.source});
}

StageResult IngestStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  Intake m{in, ctx, log};
  m.parsed = in.value.size() <= config_.max_request_bytes
                 ? ParseInputJson(in.value, &m.doc)
                 : Status::Error(errc::kRequestTooLarge, "not parsed");
  m.said = m.doc.is_object() ? m.doc : Json::object();
  // 1. Who sent it (docs/trust.md).
  if (auto done = Authenticate(m)) return std::move(*done);
  // 2. The message itself.
  if (auto done = Parse(m)) return std::move(*done);
  // 3. The tool's name as tollgate knows it, and the normalised request.
  Normalised n;
  if (auto done = Normalise(m, &n)) return std::move(*done);
  // 4. Seen before? De-duplication by request_id, from the log.
  if (auto done = Deduplicate(m, n)) return std::move(*done);
  // 5. Received: request.received in the log, the request on to decide.
  return Record(m, n);
}

std::optional<StageResult> IngestStage::Authenticate(Intake& m) {
  const Message& in = m.in;
  const StageContext& ctx = m.ctx;
  SignedBy& who = m.who;
  Json& said = m.said;
  bool authed = config_.credentials != nullptr &&
                AuthenticateRequest(in, *config_.credentials, ctx.now_us, config_.max_skew_us, &who);
  if (config_.credentials == nullptr) {
    who.code = errc::kUnauthenticated;
    who.check = "registry";
    who.message = "this ingest has no agent registry: nothing is accepted";
  }
  if (!said.contains("org_id") && !who.claimed_org.empty()) said["org_id"] = who.claimed_org;
  if (!said.contains("agent_id") && !who.claimed_identity.empty()) said["agent_id"] = who.claimed_identity;
  m.request_id = RequestIdOfSource(ctx.source);
  if (const Json* rid = Field(said, "request_id"); rid && SafeId(rid) != kUnknown) {
    m.request_id = rid->get<std::string>();
  } else if (Json c(who.claimed_request_id); SafeId(&c) != kUnknown) {
    m.request_id = who.claimed_request_id;
  } else if (authed || who.signature_ok) {
    // Signed without an id: one from the signature, so a replayed copy of
    // the same signed message is the same request.
    m.request_id = "j-" + Sha256Hex(in.headers.at(kHeaderAuth)).substr(0, 24);
  }
  if (!authed && who.code == errc::kSignatureExpired && who.signature_ok) {
    // Read again after a crash, later than the skew: if this very message
    // was received, it was authenticated then.
    std::vector<Event> history;
    Status s = m.log.EventsOfRequest(who.claims.value("org_id", ""), m.request_id, &history);
    if (!s.ok()) return Failed(s);
    RequestState st = Summarize(history);
    authed = st.received != nullptr && SourceOf(st.received) == ctx.source;
    if (authed) {
      who.org_id = who.claims.value("org_id", "");
      who.identity = who.claims.value("agent_id", "");
    }
  }
  if (!authed && !who.signature_ok) return RejectUnproven(in, ctx, said, m.request_id, who);
  if (!authed) {
    // The signer is proven (only its time failed): filed under it.
    said["org_id"] = who.claims.value("org_id", "");
    said["agent_id"] = who.claims.value("agent_id", "");
    return Reject(in, ctx, said, m.request_id,
                  Rejection{who.code, who.message, ctx.source, Json{{"check", who.check}}});
  }
  said["org_id"] = who.org_id;
  said["agent_id"] = who.identity;
  return std::nullopt;
}

std::optional<StageResult> IngestStage::Parse(Intake& m) {
  const Message& in = m.in;
  const StageContext& ctx = m.ctx;
  const SignedBy& who = m.who;
  Json& doc = m.doc;
  if (in.value.size() > config_.max_request_bytes) {
    return Refuse(m, errc::kRequestTooLarge,
                  "request is " + std::to_string(in.value.size()) + " bytes; the limit is " +
                      std::to_string(config_.max_request_bytes));
  }
  if (!m.parsed.ok()) {
    // A parse limit (depth, number range) keeps its own code; malformed
    // JSON is an invalid request.
    const char* code =
        m.parsed.code() == errc::kInvalidJson ? errc::kInvalidRequest : m.parsed.code().c_str();
    return Refuse(m, code, "request is not JSON: " + m.parsed.message());
  }
  if (!doc.is_object()) return Refuse(m, errc::kInvalidRequest, "request must be a JSON object");
  Status s = SchemaRegistry::Builtin().Validate("tool_request", doc);
  if (!s.ok()) return Refuse(m, errc::kInvalidRequest, s.message());
  // The body speaks for the signer only: the identity it names must be the
  // signed one, and so must its request_id.
  if (doc["org_id"] != who.org_id || doc["agent_id"] != who.identity ||
      (!who.claimed_request_id.empty() &&
       doc.value("request_id", who.claimed_request_id) != who.claimed_request_id)) {
    Rejection why{errc::kUnauthenticated,
                  "the request names org '" + doc["org_id"].get<std::string>() + "', agent '" +
                      doc["agent_id"].get<std::string>() + "' or a request_id other than its signature's",
                  ctx.source, Json{{"check", "claims"}}};
    return Reject(in, ctx, m.said, m.request_id, std::move(why));
  }
  // A scheduled call (core/schedules.h) is believed only as far as the log
  // bears it out: the successful create of that schedule, same call.
  if (ClaimsScheduled(doc, m.request_id)) {
    std::vector<Event> create;
    if (const std::string rid = CreateRequestNamedBy(doc); !rid.empty()) {
      if (Status read = m.log.EventsOfRequest(who.org_id, rid, &create); !read.ok()) return Failed(read);
    }
    if (Status ok = CheckScheduledRequest(doc, m.request_id, create, ctx.now_us); !ok.ok()) {
      return Refuse(m, ok.code().c_str(), ok.message());
    }
  }
  return std::nullopt;
}

std::optional<StageResult> IngestStage::Normalise(Intake& m, Normalised* n) {
  Json& doc = m.doc;
  // Kaizen's mcp__kaizen_builtin__X is the built-in X from here on
  // (core/tool_catalog.h, CanonicalToolName), so decide, execute, the log
  // and replay see one name; the name the agent used is kept in
  // request.received's `tool_called`.
  n->tool_called = doc["tool"].get<std::string>();
  doc["tool"] = std::string(CanonicalToolName(n->tool_called));
  // The request's own `action` and args.action name one action: a tool that
  // takes it as an argument (Duragent's) gets it there, and two that
  // differ are refused, so decide and execute see one (core/invocation.h).
  if (doc.contains("action") && doc["action"].is_string() && doc["args"].is_object()) {
    const Json& act = doc["action"];
    if (doc["args"].contains("action") && doc["args"]["action"] != act) {
      return Refuse(m, errc::kInvalidArgs, "the request's action and args.action differ");
    }
    if (ToolTakesAction(doc["tool"].get<std::string>())) doc["args"]["action"] = act;
  }
  // Its contract: its args fit its schema (core/tool_args.h).
  Status s = CheckToolArgs(doc["tool"].get<std::string>(), doc["args"]);
  if (!s.ok()) return Refuse(m, s.code().c_str(), s.message());

  // The normalised request: the contract's fields, request_id filled in.
  Json& request = n->request;
  request = Json{{"request_id", m.request_id},      {"org_id", doc["org_id"]}, {"agent_id", doc["agent_id"]},
                 {"session_id", doc["session_id"]}, {"tool", doc["tool"]},     {"args", doc["args"]}};
  for (const char* opt : {"action", "estimated_cost_usd", "metadata"}) {
    if (doc.contains(opt)) request[opt] = doc[opt];
  }
  n->args_hash = ArgsHash(request["args"]);
  std::string canon;
  s = CanonicalBytes(request, &canon);
  if (!s.ok()) return Refuse(m, errc::kInvalidRequest, s.message());
  n->content_hash = Sha256Hex(canon);
  return std::nullopt;
}

std::optional<StageResult> IngestStage::Deduplicate(const Intake& m, const Normalised& n) {
  const Json& request = n.request;
  // By request_id, from the log (the header).
  std::vector<Event> history;
  Status s = m.log.EventsOfRequest(request["org_id"], m.request_id, &history);
  // The log cannot be read: fail closed (the runner retries) rather than
  // risk a second execution.
  if (!s.ok()) return Failed(s);
  RequestState state = Summarize(history);
  // A request rejected before under this id (say, invalid then fixed) was
  // never received, so the id is still free.
  if (state.received == nullptr) return std::nullopt;
  if (state.received->data.value("content_hash", "") != n.content_hash) {
    return Refuse(m, errc::kDuplicateRequest,
                  "request_id '" + m.request_id + "' was already used for a different request");
  }
  StageResult r;
  // Whoever sent this copy, the request goes on in the trace it was received with.
  const std::string tp = TraceparentOf(*state.received);
  if (SourceOf(state.received) == m.ctx.source) {
    // Read again after a crash: forward exactly what was forwarded before.
    Flow flow{request, state.received->data.value("received_at", ""), n.args_hash, nullptr};
    r.outputs.push_back({MessageFor(config_.topics.decide(), request, flow.ToJson()), -1});
  }
  // An agent's retry: no second execution. A finished request gets its
  // recorded outcome again; one in flight gets nothing new (its result is
  // on its way).
  Json original = ResultFromLog(state);
  if (!original.is_null()) r.outputs.push_back({MessageFor(config_.topics.results(), request, original), -1});
  for (StageOutput& o : r.outputs) StampTraceparent(tp, &o.message);
  return r;
}

StageResult IngestStage::Record(const Intake& m, const Normalised& n) {
  const Json& request = n.request;
  const StageContext& ctx = m.ctx;
  // Secrets redacted by key and by value (docs/redaction.md); the flow
  // forwarded below keeps them for the executor, content_hash covers them.
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
  e.type = ev::kRequestReceived;
  e.request_id = m.request_id;
  e.org_id = request["org_id"];
  e.id = MakeRequestEventId(e.org_id, e.type, m.request_id);
  e.time_us = ctx.now_us;
  e.agent_id = request["agent_id"];
  e.session_id = request["session_id"];
  e.tool = request["tool"];
  e.data = {{"request", logged},          {"args_hash", n.args_hash}, {"content_hash", n.content_hash},
            {"received_at", received_at}, {"source", ctx.source},     {"redacted", redacted},
            {"signed_by", m.who.key_id}};
  if (!m.who.via.empty()) e.data["via"] = m.who.via;
  if (n.tool_called != request["tool"]) e.data["tool_called"] = n.tool_called;
  const std::string tp = TraceFor(m.in, e.org_id, m.request_id);
  StampTraceparent(tp, &e);
  StageResult r;
  r.events.push_back(std::move(e));
  Flow flow{request, received_at, n.args_hash, nullptr};
  r.outputs.push_back({MessageFor(config_.topics.decide(), request, flow.ToJson()), -1});
  StampTraceparent(tp, &r.outputs.back().message);
  return r;
}

}  // namespace tollgate
