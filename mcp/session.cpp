#include "mcp/session.h"

#include "core/auth.h"
#include "core/event.h"
#include "core/messages.h"
#include "core/sha256.h"
#include "core/tool_args.h"
#include "core/trace.h"

namespace tollgate::mcp {

namespace {

constexpr const char* kInstructions =
    "Every tool call goes through tollgate: it is decided under the policy in force, may wait for a human "
    "approver, and is recorded in a hash-chained audit log. A denied call returns isError with the reason.";

// Cancellations kept for a call not seen yet (Session::early_cancels_):
// the two POSTs of one client arrive milliseconds apart, if apart at all.
constexpr size_t kMaxEarlyCancels = 256;
constexpr std::chrono::seconds kEarlyCancelTtl{60};

std::string Fingerprint(const Json& list) { return Sha256Hex(list.value("tools", Json::array()).dump()); }

}  // namespace

std::string MetaTraceparent(const Json& params) {
  if (!params.is_object()) return "";
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return "";
  auto tp = meta->find("traceparent");
  if (tp == meta->end() || !tp->is_string() || !IsValidTraceparent(tp->get_ref<const std::string&>()))
    return "";
  return tp->get<std::string>();
}

Session::Session(const Gateway& gateway, Who who, std::string mcp_session_id)
    : gw_(gateway), who_(std::move(who)), mcp_session_(std::move(mcp_session_id)) {}

void Session::Handle(const Incoming& in, const Send& send, const std::function<bool()>& gone) {
  using Kind = Incoming::Kind;
  if (in.kind == Kind::kInvalid) return send(Error(in.id, in.error_code, in.error_message));
  if (in.kind == Kind::kResponse) return;  // we send no requests
  if (in.kind == Kind::kNotification) {
    if (in.method == "notifications/cancelled") Cancel(in.params);
    return;  // initialized, roots/list_changed, ...: nothing to do
  }
  if (in.method == "initialize") return send(Result(in.id, Initialize(in)));
  if (in.method == "ping") return send(Result(in.id, Json::object()));
  if (in.method == "tools/list") {
    Json list = ListTools(in);
    return send(list.contains("error") ? Error(in.id, kInternalError, list["error"].get<std::string>())
                                       : Result(in.id, std::move(list)));
  }
  if (in.method == "tools/call") return CallTool(in, send, gone);
  send(Error(in.id, kMethodNotFound,
             "method '" + in.method + "' is not served (this server offers tools only)"));
}

Json Session::Initialize(const Incoming& in) {
  ToolsChanged();  // the list as of now is the one the client starts from
  initialized_ = true;
  if (in.params.contains("clientInfo") && in.params["clientInfo"].is_object()) {
    std::lock_guard<std::mutex> lock(mu_);
    client_name_ = in.params["clientInfo"].value("name", "");
  }
  const Json v = in.params.value("protocolVersion", Json());
  return {{"protocolVersion", NegotiateVersion(v.is_string() ? v.get<std::string>() : "")},
          {"capabilities", {{"tools", {{"listChanged", true}}}}},
          {"serverInfo", {{"name", "tollgate"}, {"title", "tollgate gateway"}, {"version", "0.2"}}},
          {"instructions", kInstructions}};
}

Json Session::ListTools(const Incoming& in) {
  Json list;
  Status s = gw_.list_tools ? gw_.list_tools(who_.org, who_.agent, &list)
                            : Status::Error("E_UNAVAILABLE", "no tool directory");
  if (!s.ok()) return {{"error", "cannot list tools: " + s.ToString()}};
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen_ = Fingerprint(list);
  }
  // Discovery's filters, when the client gives them (a tollgate extension
  // of tools/list's params; docs/mcp.md "Discovery"): category, safe_only,
  // keyword.
  ToolQuery q;
  if (in.params.is_object()) {
    if (in.params.contains("category") && in.params["category"].is_string())
      q.category = in.params["category"];
    if (in.params.contains("keyword") && in.params["keyword"].is_string()) q.keyword = in.params["keyword"];
    q.safe_only = in.params.value("safe_only", Json(false)) == Json(true);
  }
  Json tools = Json::array();
  for (const Json& t : DiscoverTools(list.value("tools", Json::array()), q)) {
    const std::string name = t.value("name", "");
    const bool read_only = t.value("read_only", false);
    Json schema = t.value("input_schema", Json::object());
    if (!schema.is_object() || schema.value("type", "") != "object") schema = {{"type", "object"}};
    Json annotations{{"readOnlyHint", read_only},
                     {"destructiveHint", !read_only},
                     {"openWorldHint", t.value("source", "") != "builtin"}};
    tools.push_back({{"name", ClientToolName(name)},
                     {"description", t.value("description", "")},
                     {"inputSchema", std::move(schema)},
                     {"annotations", std::move(annotations)},
                     {"_meta",
                      {{"io.tollgate/tool", name},
                       {"io.tollgate/danger", t.value("danger", "")},
                       {"io.tollgate/asks", t.value("asks", false)},
                       {"io.tollgate/depends_on_arguments", t.value("depends_on_arguments", false)}}}});
  }
  return {{"tools", std::move(tools)}};
}

bool Session::ToolsChanged() {
  Json list;
  if (!gw_.list_tools || !gw_.list_tools(who_.org, who_.agent, &list).ok()) return false;
  const std::string now = Fingerprint(list);
  std::lock_guard<std::mutex> lock(mu_);
  if (seen_.empty() || seen_ == now) {
    seen_ = now;
    return false;
  }
  seen_ = now;
  return true;
}

void Session::Cancel(const Json& params) {
  if (!params.is_object() || !params.contains("requestId")) return;
  const std::string key = params["requestId"].dump();
  std::shared_ptr<Call> call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(key);
    if (it == in_flight_.end()) {
      // Its call has not come yet (or is over: then this is harmless).
      if (early_cancels_.size() >= kMaxEarlyCancels) early_cancels_.pop_front();
      early_cancels_.emplace_back(key, std::chrono::steady_clock::now() + kEarlyCancelTtl);
      return;
    }
    call = it->second;
  }
  // Withdrawn before the cancellation is answered (over HTTP, its 202): an
  // approval sent after that comes after the withdrawal.
  GiveUp(*call);
}

void Session::GiveUp(Call& call) {
  std::lock_guard<std::mutex> lock(call.mu);
  call.given_up = true;
  if (!call.published || call.withdrawn || !gw_.withdraw) return;
  call.withdrawn = true;
  // Keyed by agent, as approvers' responses are (core/messages.h
  // MessageFor): one partition, so an approval sent after the withdrawal is
  // read after it. A withdrawal the bus does not take now is sent again,
  // freshly signed, until it does (PublishOrRetry).
  const Gateway* gw = &gw_;
  gw_.pipeline->PublishOrRetry([gw, org = who_.org, agent = who_.agent, rid = call.rid](Message* w) {
    Status s = gw->withdraw(org, agent, rid, w);
    w->key = agent;
    return s;
  });
}

bool Session::Submit(const std::shared_ptr<Call>& call, const Message& m, Status* error) {
  std::lock_guard<std::mutex> lock(call->mu);
  if (call->given_up) return false;
  *error = gw_.pipeline->Publish(m);
  call->published = error->ok();
  return call->published;
}

void Session::CallTool(const Incoming& in, const Send& send, const std::function<bool()>& gone) {
  const Json& p = in.params;
  if (!p.contains("name") || !p["name"].is_string() || p["name"].get<std::string>().empty()) {
    return send(Error(in.id, kInvalidParams, "tools/call needs params.name, a non-empty string"));
  }
  Json args = p.value("arguments", Json::object());
  if (!args.is_object()) return send(Error(in.id, kInvalidParams, "params.arguments must be an object"));
  const std::string tool = ToolFromClientName(p["name"]);

  // Arguments of a listed tool are checked against its schema first; a tool
  // not listed still goes to the pipeline, whose decide denies it on the
  // record.
  Json list;
  if (gw_.list_tools && gw_.list_tools(who_.org, who_.agent, &list).ok()) {
    for (const Json& t : list.value("tools", Json::array())) {
      if (t.value("name", "") != tool) continue;
      std::string why = CheckArgsShape(t.value("input_schema", Json::object()), args);
      if (!why.empty())
        return send(Error(in.id, kInvalidParams, "invalid arguments for " + tool + ": " + why));
    }
  }

  const std::string rid = RequestIdFor(mcp_session_, in.id);
  auto call = std::make_shared<Call>();
  call->rid = rid;
  const std::string key = in.id.dump();
  std::string client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    client = client_name_;
    const auto now = std::chrono::steady_clock::now();
    while (!early_cancels_.empty() && early_cancels_.front().second < now) early_cancels_.pop_front();
    for (auto it = early_cancels_.begin(); it != early_cancels_.end(); ++it) {
      if (it->first != key) continue;
      early_cancels_.erase(it);
      call->given_up = true;  // cancelled before it came: never submitted
      break;
    }
    if (!call->given_up) in_flight_[key] = call;
  }
  if (call->given_up) return;  // no response to a cancelled call
  Json req{{"request_id", rid},
           {"org_id", who_.org},
           {"agent_id", who_.agent},
           {"session_id", who_.session},
           {"tool", tool},
           {"args", std::move(args)},
           {"metadata", {{"via", "mcp"}, {"mcp_client", client}}}};
  Message m = MessageFor(gw_.pipeline->topics().requests(), req, req);
  m.headers[kHeaderAuth] = gw_.sign_request(who_.org, who_.agent, rid, m.value);
  // The agent's trace context, when well-formed (else ingest starts one):
  // the call joins the agent's own trace (docs/mcp.md).
  if (std::string tp = MetaTraceparent(p); !tp.empty()) m.headers[kHeaderTraceparent] = tp;

  std::shared_ptr<PipelineClient::Waiter> waiter;
  Status e = gw_.pipeline->Expect(who_.org, who_.agent, rid, &waiter);
  struct Cleanup {
    Session* s;
    std::string key, org, rid;
    ~Cleanup() {
      s->gw_.pipeline->Forget(org, rid);
      std::lock_guard<std::mutex> lock(s->mu_);
      s->in_flight_.erase(key);
    }
  } cleanup{this, key, who_.org, rid};
  if (!e.ok()) {
    return send(
        Result(in.id, GatewayErrorResult(rid, "E_UNAVAILABLE", "cannot read results: " + e.ToString())));
  }
  // A client already gone (hung up while the call was on its way) gave it
  // up: nothing is submitted.
  if (gone && gone()) call->given_up = true;
  Status s;
  if (!Submit(call, m, &s)) {
    if (!s.ok())
      send(Result(in.id, GatewayErrorResult(rid, "E_UNAVAILABLE", "cannot publish: " + s.ToString())));
    return;
  }
  // After a restart of the deployment (PipelineClient::Follow), the same
  // request, signed anew: ingest answers a finished one with its recorded
  // result, takes one lost with the old bus, and ignores one in flight.
  waiter->OnReconnect([gw = &gw_, call, m, who = who_] {
    std::lock_guard<std::mutex> lock(call->mu);
    if (call->given_up) return;
    Message again = m;
    again.headers[kHeaderAuth] = gw->sign_request(who.org, who.agent, call->rid, m.value);
    gw->pipeline->Publish(again);
  });
  Await(in, *call, *waiter, send, gone);
}

void Session::Await(const Incoming& in, Call& call, PipelineClient::Waiter& waiter, const Send& send,
                    const std::function<bool()>& gone) {
  const std::string& rid = call.rid;
  // Progress while it waits, when the client asked for it.
  Json token;
  if (in.params.contains("_meta") && in.params["_meta"].is_object())
    token = in.params["_meta"].value("progressToken", Json());
  const auto start = std::chrono::steady_clock::now();
  auto next_progress = start + gw_.progress_every;
  int progress = 0;
  auto tick = [&] {
    if (token.is_null() || std::chrono::steady_clock::now() < next_progress) return;
    next_progress += gw_.progress_every;
    const auto waited =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
    std::string where = gw_.describe ? gw_.describe(who_.org, rid) : "";
    if (where.empty()) where = "in the pipeline";
    send(Notification("notifications/progress",
                      {{"progressToken", token},
                       {"progress", ++progress},
                       {"message", rid + ": " + where + " (" + std::to_string(waited.count()) + " s)"}}));
  };
  // A client that hung up (or lost its credentials) gave up as one that
  // cancels does: its call must not hold a connection, or a pending
  // approval, until the approval's deadline.
  bool left = false;
  std::optional<Json> result = waiter.Wait(
      start + gw_.max_wait,
      [&] {
        if (call.given_up.load() || closed_.load()) return true;
        left = gone && gone();
        return left;
      },
      tick);
  if (result) return send(Result(in.id, CallToolResultOf(*result)));
  if (call.given_up.load() || left || ended_.load()) {
    // The client gave up: withdraw the approval it may be waiting for (the
    // approve stage records it, or keeps it for the ask still on its way).
    // No response, as the spec says.
    return GiveUp(call);
  }
  if (closed_.load()) return;  // the server is going away; the call is not given up
  send(Result(in.id, GatewayErrorResult(rid, "E_RESULT_TIMEOUT",
                                        "no result within " + std::to_string(gw_.max_wait.count()) +
                                            " s; the request goes on under request_id " + rid)));
}

}  // namespace tollgate::mcp
