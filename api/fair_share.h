// Fair sharing of the HTTP server's connections (docs/http_api.md,
// "Limits"): capacity is per identity, with room kept for approvers and
// operators, so no agent (or anonymous socket) can take it from the others.
//
// Every connection is counted, from accept to close, in one of three pools:
//  - unauthenticated: until a handler has checked its bearer token, and for
//    the whole of a request that needs none (/healthz, the console's
//    files). At most max_unauthenticated; when a new connection finds the
//    pool full, the oldest one is cut (its socket shut down), those still
//    sending their headers (for a quarter of a second or more) first. So
//    idle or trickling sockets only ever displace each other: a client that
//    sends its request at once (an approver, /healthz) gets in.
//  - agent: a token with no role but `agent`, charged to the token, to its
//    (org, agent) and to its org, each with a cap (429
//    E_TOO_MANY_CONNECTIONS), and all agents together under
//    max_agent_connections (503 E_BUSY). A long-held connection (an MCP
//    event stream, a tools/call waiting for its approval) stays charged to
//    its identity while it lasts.
//  - staff: a token with an approver, auditor, operator or admin role, in a
//    pool of its own that agents cannot use (max_staff_connections, and the
//    per-token cap).
//
// Thread-safe. Pure accounting: the sockets are the caller's; Enter() may
// shut one down (never close it) to make room.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/canonical_json.h"

namespace tollgate {

struct FairShareLimits {
  int max_unauthenticated = 256;
  // The request line and headers must arrive within this of the accept.
  std::chrono::milliseconds header_deadline{3000};
  int max_agent_connections = 512;
  int max_connections_per_org = 128;   // agent connections of one org
  int max_connections_per_agent = 32;  // of one (org, agent), over all its tokens
  int max_connections_per_token = 16;  // agent and staff tokens alike
  int max_staff_connections = 128;
  Json ToJson() const;
  // Every connection the pools can hold at once.
  int total() const { return max_unauthenticated + max_agent_connections + max_staff_connections; }
};

// Whom a connection is charged to, once its token is known.
struct ConnectionOwner {
  std::string token_key;   // a digest of the bearer token (never the token)
  std::string org, agent;  // the token's binding (agent: its identity)
  bool staff = false;      // approver, auditor, operator or admin
};

// Why a connection was refused: an HTTP status, a code and a message.
struct Refusal {
  int status = 0;
  std::string code, message;
};

class ConnectionBudget {
 public:
  explicit ConnectionBudget(FairShareLimits limits = {});

  // A connection accepted on `sock`, counted as unauthenticated; its id.
  // When the pool is full, the oldest unauthenticated connection (one
  // still sending its headers first) is shut down to make room.
  uint64_t Enter(int sock);
  // The connection's request line and headers have arrived: it is cut
  // only after those that are still sending theirs.
  void HeadersDone(uint64_t id);
  // Charges connection `id` to `who` (once; a second call for the same
  // owner is a no-op). False with *why when a cap refuses it; it then
  // stays unauthenticated.
  bool Charge(uint64_t id, const ConnectionOwner& who, Refusal* why);
  // The connection is closed.
  void Leave(uint64_t id);
  // Shuts down the oldest unauthenticated connection (the server's workers
  // are all busy); false when there is none.
  bool EvictOldest();

  struct Usage {
    int unauthenticated = 0, agent = 0, staff = 0;
    uint64_t evicted = 0, refused_identity = 0, refused_busy = 0;
  };
  Usage usage() const;
  // Agent connections of one org, and of one (org, agent).
  int org_connections(const std::string& org) const;
  int agent_connections(const std::string& org, const std::string& agent) const;
  const FairShareLimits& limits() const { return limits_; }

 private:
  struct Conn {
    int sock = -1;
    std::chrono::steady_clock::time_point since;  // accepted
    bool headers_done = false;
    bool charged = false;
    bool evicted = false;
    ConnectionOwner owner;
  };
  bool EvictLocked();
  void Release(Conn& c);

  const FairShareLimits limits_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Conn> conns_;  // by id: oldest first
  std::map<std::string, int> per_token_, per_agent_, per_org_;
  Usage usage_;
};

}  // namespace tollgate
