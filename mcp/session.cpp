#include "mcp/session.h"

#include <set>
#include <thread>

#include "core/auth.h"
#include "core/event.h"
#include "core/messages.h"
#include "core/request_state.h"
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

// How long a remembered pending call stays attachable at most.
constexpr std::chrono::hours kAttachTtl{24};
constexpr int64_t kPollIntervalMs = 1000;

// A session id a client may name: what an agent's own would look like.
bool PlainSessionId(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  return s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") ==
         std::string::npos;
}

// A task's fields but its status (and what goes with the status).
Json TaskShape(const std::string& rid, int64_t created_us, int64_t updated_us) {
  return {{"taskId", rid},
          {"createdAt", FormatTime(created_us)},
          {"lastUpdatedAt", FormatTime(updated_us)},
          {"ttlMs", nullptr},
          {"pollIntervalMs", kPollIntervalMs}};
}

// A tollgate result that ended in the agent's own withdrawal.
bool Withdrawn(const Json& result) {
  auto r = result.find("result");
  if (r == result.end() || !r->is_object()) return false;
  auto e = r->find("error");
  return e != r->end() && e->is_object() && e->value("code", "") == errc::kWithdrawn;
}

}  // namespace

void Attachments::Remember(const std::string& key, const std::string& rid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_key_.count(key) == 0) order_.push_back(key);
  by_key_[key] = {rid, Clock::now() + kAttachTtl, false};
  while (order_.size() > kMax) {
    by_key_.erase(order_.front());
    order_.pop_front();
  }
}

std::string Attachments::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return "";
  if (it->second.until < Clock::now()) {
    by_key_.erase(it);
    return "";
  }
  it->second.attached = true;
  return it->second.rid;
}

bool Attachments::Attached(const std::string& key, const std::string& rid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  return it != by_key_.end() && it->second.rid == rid && it->second.attached;
}

void Attachments::Forget(const std::string& key, const std::string& rid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  if (it != by_key_.end() && it->second.rid == rid) by_key_.erase(it);
}

bool Session::ServesModern(const std::string& method) {
  static const std::set<std::string> kMethods = {"server/discover",     "tools/list",   "tools/call",
                                                 "tasks/get",           "tasks/cancel", "tasks/update",
                                                 "subscriptions/listen"};
  return kMethods.count(method) > 0;
}

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
  const Envelope env = ReadEnvelope(in.params);
  if (env.error_code != 0) return send(Error(in.id, env.error_code, env.error_message, env.error_data));
  if (env.modern) return HandleModern(in, env, send, gone);
  if (in.method == "initialize") return send(Result(in.id, Initialize(in)));
  if (in.method == "ping") return send(Result(in.id, Json::object()));
  if (in.method == "tools/list") {
    Json list = ListTools(in);
    return send(list.contains("error") ? Error(in.id, kInternalError, list["error"].get<std::string>())
                                       : Result(in.id, std::move(list)));
  }
  if (in.method == "tools/call") return CallTool(in, env, send, gone);
  send(Error(in.id, kMethodNotFound,
             "method '" + in.method + "' is not served (this server offers tools only)"));
}

void Session::HandleModern(const Incoming& in, const Envelope& env, const Send& send,
                           const std::function<bool()>& gone) {
  if (in.method == "server/discover") return send(Result(in.id, DiscoverResult(kInstructions)));
  if (in.method == "tools/list") {
    Json list = ListTools(in);
    if (list.contains("error")) return send(Error(in.id, kInternalError, list["error"].get<std::string>()));
    list["ttlMs"] = 0;
    list["cacheScope"] = "private";
    return send(Result(in.id, Complete(std::move(list))));
  }
  if (in.method == "tools/call") return CallTool(in, env, send, gone);
  if (in.method == "subscriptions/listen") return Listen(in, env, send, gone);
  if (in.method.rfind("tasks/", 0) == 0 && ServesModern(in.method)) {
    if (!env.tasks) return send(MissingTasksError(in.id));
    return Task(in, send);
  }
  send(Error(in.id, kMethodNotFound, "method '" + in.method + "' is not served in revision " + env.version));
}

std::string Session::Where(const std::string& rid) {
  std::vector<Event> events;
  if (!gw_.events || !gw_.events(who_.org, rid, &events).ok()) return "";
  return DescribeProgress(Summarize(events));
}

Status Session::ReadTask(const std::string& rid, Json* task, bool* ended) {
  // The task is the request; only its own agent may see or end it. Another
  // agent's is as unknown as one that never was.
  std::vector<Event> events;
  Status st = gw_.events ? gw_.events(who_.org, rid, &events) : Status::Error("E_UNAVAILABLE", "no log");
  if (!st.ok()) return st;
  const RequestState state = Summarize(events);
  if (state.received == nullptr || state.received->agent_id != who_.agent)
    return Status::Error("E_NOT_FOUND", "task not found: " + rid);
  *task = TaskShape(rid, state.received->time_us, events.back().time_us);
  const Json result = ResultFromLog(state);
  *ended = !result.is_null();
  if (result.is_null()) {
    (*task)["status"] = "working";
    (*task)["statusMessage"] = DescribeProgress(state);
  } else if (Withdrawn(result)) {
    (*task)["status"] = "cancelled";
    (*task)["statusMessage"] = "withdrawn before it ran";
  } else {
    (*task)["status"] = "completed";
    (*task)["result"] = Complete(CallToolResultOf(result));
  }
  return Status::Ok();
}

void Session::Task(const Incoming& in, const Send& send) {
  const Json id = in.params.value("taskId", Json());
  if (!id.is_string() || id.get_ref<const std::string&>().empty() ||
      id.get_ref<const std::string&>().size() > 256)
    return send(Error(in.id, kInvalidParams, "params.taskId must be a task id"));
  const std::string rid = id;
  Json task;
  bool ended = false;
  Status st = ReadTask(rid, &task, &ended);
  if (st.code() == "E_NOT_FOUND") return send(Error(in.id, kInvalidParams, st.message()));
  if (!st.ok()) return send(Error(in.id, kInternalError, "cannot read the task: " + st.ToString()));
  if (in.method == "tasks/update") return send(Result(in.id, Complete(Json::object())));  // no input asked
  if (in.method == "tasks/cancel") {
    // Withdrawn as a cancelled call is; the approve stage records it, and
    // an approval read after the withdrawal runs nothing.
    if (!ended) Withdraw(rid);
    return send(Result(in.id, Complete(Json::object())));
  }
  send(Result(in.id, Complete(std::move(task))));
}

void Session::Listen(const Incoming& in, const Envelope& env, const Send& send,
                     const std::function<bool()>& gone) {
  const Json filter = in.params.value("notifications", Json::object());
  if (!filter.is_object())
    return send(Error(in.id, kInvalidParams, "params.notifications must be an object"));
  const bool tools = filter.value("toolsListChanged", Json(false)) == Json(true);
  std::map<std::string, std::string> tasks;  // task id -> the last state sent
  if (auto ids = filter.find("taskIds"); ids != filter.end()) {
    if (!env.tasks) return send(MissingTasksError(in.id));
    if (!ids->is_array() || ids->size() > kMaxListenedTasks)
      return send(Error(in.id, kInvalidParams,
                        "notifications.taskIds must be an array of at most " +
                            std::to_string(kMaxListenedTasks) + " task ids"));
    for (const Json& id : *ids) {
      Json task;
      bool ended = false;
      // Only the agent's own tasks are acknowledged; others are left out.
      if (id.is_string() && ReadTask(id, &task, &ended).ok()) tasks[id] = "";
    }
  }
  // The call's own entry: notifications/cancelled ends the listen.
  auto call = std::make_shared<Call>();
  const std::string key = in.id.dump();
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_[key] = call;
  }
  struct Cleanup {
    Session* s;
    std::string key;
    ~Cleanup() {
      std::lock_guard<std::mutex> lock(s->mu_);
      s->in_flight_.erase(key);
    }
  } cleanup{this, key};
  const Json sub{{"io.modelcontextprotocol/subscriptionId", in.id}};
  Json agreed = Json::object();
  if (tools) agreed["toolsListChanged"] = true;
  if (!tasks.empty()) {
    agreed["taskIds"] = Json::array();
    for (const auto& [id, last] : tasks) agreed["taskIds"].push_back(id);
  }
  send(Notification("notifications/subscriptions/acknowledged", {{"notifications", agreed}, {"_meta", sub}}));
  if (tools) ToolsChanged();  // the list as of now is the one the client knows
  // Polled: the log is the source of each task's state, the directory of
  // the tool list; a change is sent once.
  while (!call->given_up.load() && !closed_.load() && !(gone && gone())) {
    if (tools && ToolsChanged()) send(Notification("notifications/tools/list_changed", {{"_meta", sub}}));
    for (auto it = tasks.begin(); it != tasks.end();) {
      Json task;
      bool ended = false;
      if (ReadTask(it->first, &task, &ended).ok()) {
        const std::string now = task.value("status", "") + "\n" + task.value("statusMessage", "");
        if (now != it->second) {
          it->second = now;
          task["_meta"] = sub;
          send(Notification("notifications/tasks", std::move(task)));
        }
      }
      it = ended ? tasks.erase(it) : std::next(it);
    }
    std::this_thread::sleep_for(gw_.progress_every);
  }
  // Ended by the server (a restart): the listen's result says so.
  if (closed_.load() && !ended_.load() && !call->given_up.load())
    send(Result(in.id, Complete({{"_meta", sub}})));
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
  Withdraw(call.rid);
}

void Session::Withdraw(const std::string& rid) {
  if (!gw_.withdraw) return;
  // Keyed by agent, as approvers' responses are (core/messages.h
  // MessageFor): one partition, so an approval sent after the withdrawal is
  // read after it. A withdrawal the bus does not take now is sent again,
  // freshly signed, until it does (PublishOrRetry).
  const Gateway* gw = &gw_;
  gw_.pipeline->PublishOrRetry([gw, org = who_.org, agent = who_.agent, rid](Message* w) {
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

std::string Session::Attachable(const std::string& key, const std::string& tool,
                                const std::string& args_hash) {
  std::string rid = gw_.attachments->Find(key);
  if (!rid.empty()) return rid;
  // After a restart of the gateway (for stdio, every new connection is
  // one): the log's pending approvals of this agent.
  std::vector<PendingApproval> pending;
  if (!gw_.pending || !gw_.pending(who_.org, who_.agent, &pending).ok()) return "";
  for (const PendingApproval& p : pending) {
    if (p.agent_id == who_.agent && p.tool == tool && p.args_hash == args_hash) return p.request_id;
  }
  return "";
}

void Session::CallTool(const Incoming& in, const Envelope& env, const Send& send,
                       const std::function<bool()>& gone) {
  const Json& p = in.params;
  const auto answer = [&](Json result) { return env.modern ? Complete(std::move(result)) : result; };
  if (!p.contains("name") || !p["name"].is_string() || p["name"].get<std::string>().empty()) {
    return send(Error(in.id, kInvalidParams, "tools/call needs params.name, a non-empty string"));
  }
  Json args = p.value("arguments", Json::object());
  if (!args.is_object()) return send(Error(in.id, kInvalidParams, "params.arguments must be an object"));
  const std::string tool = ToolFromClientName(p["name"]);

  // The tollgate session: the client's own name for it (modern clients have
  // no MCP session), else its trace, else the transport's (docs/mcp.md).
  std::string session = who_.session, session_from = who_.session_from;
  if (env.modern) {
    const Json meta = p.value("_meta", Json::object());
    if (auto named = meta.find(kMetaSession); named != meta.end()) {
      if (!named->is_string() || !PlainSessionId(*named))
        return send(Error(in.id, kInvalidParams,
                          std::string("_meta[\"") + kMetaSession +
                              "\"] must be 1 to 128 letters, digits and ._:- characters"));
      session = *named;
      session_from = "meta";
    } else if (std::string tp = MetaTraceparent(p); !tp.empty()) {
      session = "trace-" + tp.substr(3, 32);
      session_from = "trace";
    }
  }

  // Arguments of a listed tool are checked against its schema first; a tool
  // not listed still goes to the pipeline, whose decide denies it on the
  // record.
  Json list;
  bool may_ask = true;
  if (gw_.list_tools && gw_.list_tools(who_.org, who_.agent, &list).ok()) {
    for (const Json& t : list.value("tools", Json::array())) {
      if (t.value("name", "") != tool) continue;
      std::string why = CheckArgsShape(t.value("input_schema", Json::object()), args);
      if (!why.empty())
        return send(Error(in.id, kInvalidParams, "invalid arguments for " + tool + ": " + why));
      may_ask = t.value("asks", false) || t.value("depends_on_arguments", false);
    }
  }

  Mode mode;
  mode.modern = env.modern;
  mode.tasks = env.modern && env.tasks;
  // The identical call of a client told E_PENDING_APPROVAL (or cut off
  // mid-wait) waits for that request instead of making another.
  const std::string args_hash = ArgsHash(args);
  mode.attach_key = Sha256Hex(who_.org + '\0' + who_.agent + '\0' + tool + '\0' + args_hash);
  std::string rid = may_ask ? Attachable(mode.attach_key, tool, args_hash) : "";
  const bool attached = !rid.empty();
  if (!attached) rid = RequestIdFor(mcp_session_, in.id);
  auto call = std::make_shared<Call>();
  call->rid = rid;
  const std::string key = in.id.dump();
  std::string client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    client = env.modern ? env.client_name : client_name_;
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
  struct Cleanup {
    Session* s;
    std::string key, org, rid;
    ~Cleanup() {
      s->gw_.pipeline->Forget(org, rid);
      std::lock_guard<std::mutex> lock(s->mu_);
      s->in_flight_.erase(key);
    }
  } cleanup{this, key, who_.org, rid};
  std::shared_ptr<PipelineClient::Waiter> waiter;
  Status e = gw_.pipeline->Expect(who_.org, who_.agent, rid, &waiter);
  if (!e.ok()) {
    return send(Result(
        in.id, answer(GatewayErrorResult(rid, "E_UNAVAILABLE", "cannot read results: " + e.ToString()))));
  }

  if (attached) {
    // Read after Expect: an outcome logged before it is in the log, one
    // logged after reaches the waiter.
    std::vector<Event> events;
    if (gw_.events && gw_.events(who_.org, rid, &events).ok()) {
      const RequestState state = Summarize(events);
      const Json done = ResultFromLog(state);
      if (!done.is_null()) {
        gw_.attachments->Forget(mode.attach_key, rid);
        return send(Result(in.id, answer(CallToolResultOf(done))));
      }
      mode.pending = state.approval_pending();
    }
    // Published once already: a cancellation withdraws it.
    {
      std::lock_guard<std::mutex> lock(call->mu);
      call->published = true;
    }
    return Await(in, *call, *waiter, send, gone, mode);
  }

  Json req{{"request_id", rid},
           {"org_id", who_.org},
           {"agent_id", who_.agent},
           {"session_id", session},
           {"tool", tool},
           {"args", std::move(args)},
           {"metadata",
            {{"via", "mcp"},
             {"mcp_client", client},
             {"mcp_protocol", env.modern ? env.version : "legacy"},
             {"session_from", session_from}}}};
  if (!who_.auth.is_null()) req["metadata"]["auth"] = who_.auth;
  Message m = MessageFor(gw_.pipeline->topics().requests(), req, req);
  m.headers[kHeaderAuth] = gw_.sign_request(who_.org, who_.agent, rid, m.value);
  // The agent's trace context, when well-formed (else ingest starts one):
  // the call joins the agent's own trace (docs/mcp.md).
  if (std::string tp = MetaTraceparent(p); !tp.empty()) m.headers[kHeaderTraceparent] = tp;

  // A client already gone (hung up while the call was on its way) gave it
  // up: nothing is submitted.
  if (gone && gone()) call->given_up = true;
  Status s;
  if (!Submit(call, m, &s)) {
    if (!s.ok())
      send(
          Result(in.id, answer(GatewayErrorResult(rid, "E_UNAVAILABLE", "cannot publish: " + s.ToString()))));
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
  Await(in, *call, *waiter, send, gone, mode);
}

void Session::Await(const Incoming& in, Call& call, PipelineClient::Waiter& waiter, const Send& send,
                    const std::function<bool()>& gone, const Mode& mode) {
  const std::string& rid = call.rid;
  const auto answer = [&](Json result) { return mode.modern ? Complete(std::move(result)) : result; };
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
    std::string where = Where(rid);
    if (where.empty()) where = "in the pipeline";
    send(Notification("notifications/progress",
                      {{"progressToken", token},
                       {"progress", ++progress},
                       {"message", rid + ": " + where + " (" + std::to_string(waited.count()) + " s)"}}));
  };
  // Asked: the gate's signed `pending` message comes once approval.requested
  // is in the log. A task is then answered at once; any other client is
  // held for gw_.hold from then.
  bool asked = mode.pending;
  auto hold_until = mode.pending ? start + gw_.hold : std::chrono::steady_clock::time_point::max();
  // A client that hung up (or lost its credentials) gave up as one that
  // cancels does: its call must not hold a connection, or a pending
  // approval, until the approval's deadline.
  bool left = false;
  std::optional<Json> result = waiter.Wait(
      start + gw_.max_wait,
      [&] {
        if (call.given_up.load() || closed_.load()) return true;
        if ((left = gone && gone())) return true;
        if (!asked && waiter.pending()) {
          asked = true;
          hold_until = std::chrono::steady_clock::now() + gw_.hold;
        }
        return asked && (mode.tasks || std::chrono::steady_clock::now() >= hold_until);
      },
      tick);
  if (result) {
    gw_.attachments->Forget(mode.attach_key, rid);
    return send(Result(in.id, answer(CallToolResultOf(*result))));
  }
  if (left && asked && mode.modern && !call.given_up.load() && !ended_.load()) {
    // A 2026-07-28 client hung up while its approval is pending: a broken
    // stream (which that revision no longer resumes), or the client giving
    // up (closing the stream is how it cancels). The identical call made
    // within gw_.reattach_grace attaches to it; otherwise it is withdrawn.
    // (A legacy client cancels by message; its hang-up withdraws at once.)
    gw_.attachments->Remember(mode.attach_key, rid);
    const auto until = std::chrono::steady_clock::now() + gw_.reattach_grace;
    while (std::chrono::steady_clock::now() < until && !closed_.load()) {
      if (gw_.attachments->Attached(mode.attach_key, rid)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (gw_.attachments->Attached(mode.attach_key, rid) || closed_.load()) return;
    gw_.attachments->Forget(mode.attach_key, rid);
  }
  if (call.given_up.load() || left || ended_.load()) {
    // The client gave up: withdraw the approval it may be waiting for (the
    // approve stage records it, or keeps it for the ask still on its way).
    // No response, as the spec says.
    return GiveUp(call);
  }
  if (closed_.load()) return;  // the server is going away; the call is not given up
  if (asked) {
    if (mode.tasks) {
      // A task, durably: approval.requested is in the log, so tasks/get
      // finds it from any process, now and after restarts; answered as
      // tasks/get would answer it now (an outcome logged meanwhile is the
      // call's result instead).
      Json task;
      bool ended = false;
      if (!ReadTask(rid, &task, &ended).ok()) {
        // The log unreadable just now: still a task; tasks/get says the rest.
        task = TaskShape(rid, NowMicros(), NowMicros());
        task["status"] = "working";
        task["statusMessage"] = "awaiting approval";
      } else if (task.contains("result")) {
        return send(Result(in.id, task["result"]));
      }
      task["resultType"] = "task";
      return send(Result(in.id, std::move(task)));
    }
    std::string where = Where(rid);
    if (where.empty()) where = "awaiting approval";
    gw_.attachments->Remember(mode.attach_key, rid);
    const int retry = static_cast<int>(std::max<int64_t>(5, gw_.hold.count() / 3));
    return send(Result(in.id, answer(PendingApprovalResult(rid, where, retry))));
  }
  send(Result(in.id, answer(GatewayErrorResult(rid, "E_RESULT_TIMEOUT",
                                               "no result within " + std::to_string(gw_.max_wait.count()) +
                                                   " s; the request goes on under request_id " + rid))));
}

}  // namespace tollgate::mcp
