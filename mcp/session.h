// One MCP session of the gateway (docs/mcp.md): initialize, ping,
// tools/list, tools/call and notifications/cancelled for one authenticated
// (org, agent), whichever transport carries it; and the 2026-07-28
// revision's requests (server/discover, tools/list, tools/call, tasks/get,
// tasks/cancel, tasks/update), each read on its own: a modern request names
// its version and capabilities in its _meta (protocol.h ReadEnvelope).
//
// An asked call (docs/mcp.md "Calls awaiting approval"): a modern client that
// declared the Tasks extension gets a task once approval.requested is in the
// log, its id the request's; tasks/get reads the request's state from the
// log, so a task outlives this process and the client's. Any other client
// is held with progress for Gateway::hold, then answered E_PENDING_APPROVAL
// with the request id; the identical call (same org, agent, tool and
// arguments) made while that approval is pending, or before its outcome
// reached a client, attaches to the same request instead of making another.
//
// Who the agent is comes from the transport's authentication (the agent's
// key for stdio, its bearer token for HTTP), never from a message. Every
// tools/call is a tool request through the pipeline; the tool list is the
// ToolDirectory's answer for this agent under the policy in force.
//
// Handle() may be called from several threads at once (a transport runs
// each tools/call on its own thread so a slow approval holds only itself);
// `send` may be called from the handling thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/message.h"
#include "core/pending_approval.h"
#include "core/status.h"
#include "core/tool_discovery.h"
#include "mcp/pipeline_client.h"
#include "mcp/protocol.h"

namespace tollgate::mcp {

// The calls whose client was told E_PENDING_APPROVAL: (org, agent, tool,
// args_hash) -> request_id, until the outcome reached a client or the
// entry is a day old. Thread-safe; at most kMax entries (oldest dropped).
class Attachments {
 public:
  static constexpr size_t kMax = 4096;
  using Clock = std::chrono::steady_clock;
  void Remember(const std::string& key, const std::string& rid);
  // The request of `key`, or "" when none; marks it attached.
  std::string Find(const std::string& key);
  // Whether a call attached to `rid` since it was remembered.
  bool Attached(const std::string& key, const std::string& rid);
  void Forget(const std::string& key, const std::string& rid);

 private:
  struct Entry {
    std::string rid;
    Clock::time_point until;
    bool attached = false;
  };
  std::mutex mu_;
  std::map<std::string, Entry> by_key_;
  std::deque<std::string> order_;
};

// What a session needs from the deployment it runs in.
struct Gateway {
  PipelineClient* pipeline = nullptr;
  // ToolDirectory::List's answer for (org, agent) (deploy/tool_directory.h).
  std::function<Status(const std::string& org, const std::string& agent, Json* list)> list_tools;
  // The tollgate-auth header for a request's value bytes.
  std::function<std::string(const std::string& org, const std::string& agent, const std::string& request_id,
                            const std::string& value)>
      sign_request;
  // The signed message withdrawing the agent's pending approval; null when
  // the deployment cannot (the call is then only abandoned).
  std::function<Status(const std::string& org, const std::string& agent, const std::string& request_id,
                       Message* out)>
      withdraw;
  // The events of one request, in log order: progress messages ("awaiting
  // approval, 0 of 1, expires at ..."), tasks/get, attaching. Null: none.
  std::function<Status(const std::string& org, const std::string& request_id, std::vector<Event>* out)>
      events;
  // The pending approvals of (org, agent), for attaching a re-issued call
  // after a restart of the gateway. Null: only this process's memory.
  std::function<Status(const std::string& org, const std::string& agent, std::vector<PendingApproval>* out)>
      pending;
  // A call waits this long for its result at most; its approval's deadline
  // normally ends it first (the request then ends `expired`).
  std::chrono::seconds max_wait{3600};
  // A client without tasks waits this long for an asked call's approval,
  // then gets E_PENDING_APPROVAL (below the 60 s clients time out after).
  std::chrono::seconds hold{45};
  // A client that hung up while its call awaited approval: the identical
  // call made within this attaches to it; after it, it is withdrawn.
  std::chrono::seconds reattach_grace{10};
  std::shared_ptr<Attachments> attachments = std::make_shared<Attachments>();
  std::chrono::milliseconds progress_every{1000};
  // Whatever the functions above need kept alive (the bus client, ...).
  std::shared_ptr<void> keep_alive;
};

struct Who {
  std::string org, agent;
  // The tollgate session_id of every legacy call, and of a modern one that
  // names none in _meta (io.tollgate/session) nor has a trace; where it
  // comes from: "transport" (the MCP session) or "agent".
  std::string session;
  std::string session_from = "transport";
  // How the agent authenticated, when by OAuth: {method, issuer, subject,
  // jti, scopes}, recorded in the request's metadata (never a token).
  Json auth;
};

class Session {
 public:
  using Send = std::function<void(const Json&)>;
  Session(const Gateway& gateway, Who who, std::string mcp_session_id);

  // Handles one message; sends its response (if any) and the notifications
  // that belong to it through `send`, then returns. A cancelled call sends
  // no response (the spec's rule). `gone`, when set, says the client is no
  // longer there (hung up, or its credentials revoked): a tools/call
  // waiting for its result then ends and withdraws its pending approval,
  // as a cancellation does.
  void Handle(const Incoming& in, const Send& send, const std::function<bool()>& gone = nullptr);

  // Whether the agent's tool list now differs from the last one this
  // client was given (by initialize's time or its last tools/list, or the
  // last change reported): then send notifications/tools/list_changed.
  bool ToolsChanged();
  // The server is going away (a restart): calls still waiting stop waiting
  // and send nothing; their requests go on in the pipeline (an approval
  // after the restart still runs them).
  void Close() { closed_ = true; }
  // The client ended the session (DELETE, or end of stdin): it gave up its
  // calls still waiting, which are withdrawn as a cancellation withdraws.
  void End() {
    ended_ = true;
    closed_ = true;
  }
  bool initialized() const { return initialized_; }
  // The modern methods served (others: kMethodNotFound, HTTP 404).
  static bool ServesModern(const std::string& method);
  const Who& who() const { return who_; }
  const std::string& id() const { return mcp_session_; }

 private:
  Json Initialize(const Incoming& in);
  Json ListTools(const Incoming& in);
  void HandleModern(const Incoming& in, const Envelope& env, const Send& send,
                    const std::function<bool()>& gone);
  // tasks/get, tasks/cancel, tasks/update of a modern client with tasks.
  void Task(const Incoming& in, const Send& send);
  // The task `rid` as tasks/get shows it (without resultType), from the
  // log; *ended once it has its outcome. E_NOT_FOUND for a request that is
  // not this agent's.
  Status ReadTask(const std::string& rid, Json* task, bool* ended);
  // subscriptions/listen: acknowledges what it will send (tool list
  // changes; with the Tasks extension, the agent's own tasks of taskIds),
  // then sends notifications/tools/list_changed and notifications/tasks
  // (each change of a task once) until the client cancels or leaves.
  void Listen(const Incoming& in, const Envelope& env, const Send& send, const std::function<bool()>& gone);
  static constexpr size_t kMaxListenedTasks = 100;
  // One tools/call in flight. `mu` orders its publication and its
  // withdrawal: a call given up before it was published never is, and one
  // published is withdrawn exactly once, the moment its client gives up.
  struct Call {
    std::mutex mu;
    std::atomic<bool> given_up{false};
    bool published = false, withdrawn = false;  // guarded by mu
    std::string rid;
  };
  // How one tools/call is answered.
  struct Mode {
    bool modern = false;   // results carry resultType (Complete)
    bool tasks = false;    // an asked call becomes a task
    bool pending = false;  // attached to a request already awaiting approval
    std::string attach_key;
  };
  void CallTool(const Incoming& in, const Envelope& env, const Send& send, const std::function<bool()>& gone);
  // The request an identical earlier call left awaiting approval, or "".
  std::string Attachable(const std::string& key, const std::string& tool, const std::string& args_hash);
  // Waits for the call's result (with progress), then answers; an asked
  // call becomes a task, or ends its hold E_PENDING_APPROVAL; a call whose
  // client gave up is withdrawn.
  void Await(const Incoming& in, Call& call, PipelineClient::Waiter& waiter, const Send& send,
             const std::function<bool()>& gone, const Mode& mode);
  // Where `rid` stands, from the log ("" when not known).
  std::string Where(const std::string& rid);
  // Submits `m` for `call` unless its client already gave up; false then
  // (or with *error set when the bus refused it).
  bool Submit(const std::shared_ptr<Call>& call, const Message& m, Status* error);
  void Cancel(const Json& params);
  // The client gave the call up: withdraw it if it was submitted.
  void GiveUp(Call& call);
  // Publishes the agent's withdrawal of `rid` (until the bus takes it).
  void Withdraw(const std::string& rid);

  const Gateway& gw_;
  const Who who_;
  const std::string mcp_session_;
  std::atomic<bool> initialized_{false};
  std::atomic<bool> closed_{false}, ended_{false};
  std::string client_name_;
  std::string seen_;  // fingerprint of the tool list the client knows
  std::mutex mu_;
  // JSON-RPC id (dumped) -> the call in flight.
  std::map<std::string, std::shared_ptr<Call>> in_flight_;
  // Cancellations that came before their call (a client's two HTTP POSTs
  // race): the call, when it comes, is given up before it is submitted.
  // The last kMaxEarlyCancels, each for kEarlyCancelTtl.
  std::deque<std::pair<std::string, std::chrono::steady_clock::time_point>> early_cancels_;
};

// Tool names offered to clients: ClientToolName / ToolFromClientName
// (core/tool_discovery.h); either form is accepted in tools/call.

// A tools/call's params._meta.traceparent when it is a well-formed W3C
// traceparent (core/trace.h), else "".
std::string MetaTraceparent(const Json& params);

// A call's args are checked against the listed tool's schema with
// CheckArgsShape (core/tool_args.h) before it is submitted.

}  // namespace tollgate::mcp
