// One MCP session of the gateway (docs/mcp.md): initialize, ping,
// tools/list, tools/call and notifications/cancelled for one authenticated
// (org, agent), whichever transport carries it.
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
#include "core/message.h"
#include "core/status.h"
#include "core/tool_discovery.h"
#include "mcp/pipeline_client.h"
#include "mcp/protocol.h"

namespace tollgate::mcp {

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
  // Where a waiting call stands, for progress messages ("awaiting approval,
  // 0 of 1, expires at ..."); null or "" when not known.
  std::function<std::string(const std::string& org, const std::string& request_id)> describe;
  // A call waits this long for its result at most; its approval's deadline
  // normally ends it first (the request then ends `expired`).
  std::chrono::seconds max_wait{3600};
  std::chrono::milliseconds progress_every{1000};
  // Whatever the functions above need kept alive (the bus client, ...).
  std::shared_ptr<void> keep_alive;
};

struct Who {
  std::string org, agent;
  std::string session;  // the tollgate session_id of every call
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
  const Who& who() const { return who_; }
  const std::string& id() const { return mcp_session_; }

 private:
  Json Initialize(const Incoming& in);
  Json ListTools(const Incoming& in);
  // One tools/call in flight. `mu` orders its publication and its
  // withdrawal: a call given up before it was published never is, and one
  // published is withdrawn exactly once, the moment its client gives up.
  struct Call {
    std::mutex mu;
    std::atomic<bool> given_up{false};
    bool published = false, withdrawn = false;  // guarded by mu
    std::string rid;
  };
  void CallTool(const Incoming& in, const Send& send, const std::function<bool()>& gone);
  // Waits for the submitted call's result (with progress), then answers,
  // or withdraws the call when its client gave up.
  void Await(const Incoming& in, Call& call, PipelineClient::Waiter& waiter, const Send& send,
             const std::function<bool()>& gone);
  // Submits `m` for `call` unless its client already gave up; false then
  // (or with *error set when the bus refused it).
  bool Submit(const std::shared_ptr<Call>& call, const Message& m, Status* error);
  void Cancel(const Json& params);
  // The client gave the call up: withdraw it if it was submitted.
  void GiveUp(Call& call);

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
