#include "api/fair_share.h"

#include <sys/socket.h>

namespace tollgate {

namespace {

// A connection this young may still be sending its headers on loopback
// speed: others are cut before it.
constexpr std::chrono::milliseconds kHeadersGrace{250};

std::string AgentKey(const std::string& org, const std::string& agent) { return org + '\0' + agent; }

template <class M>
int Count(const M& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

template <class M>
void Drop(M& m, const std::string& key) {
  auto it = m.find(key);
  if (it != m.end() && --it->second <= 0) m.erase(it);
}

}  // namespace

Json FairShareLimits::ToJson() const {
  return {{"max_unauthenticated", max_unauthenticated},
          {"header_deadline_ms", header_deadline.count()},
          {"max_agent_connections", max_agent_connections},
          {"max_connections_per_org", max_connections_per_org},
          {"max_connections_per_agent", max_connections_per_agent},
          {"max_connections_per_token", max_connections_per_token},
          {"max_staff_connections", max_staff_connections}};
}

ConnectionBudget::ConnectionBudget(FairShareLimits limits) : limits_(limits) {}

uint64_t ConnectionBudget::Enter(int sock) {
  std::lock_guard<std::mutex> lock(mu_);
  if (usage_.unauthenticated >= limits_.max_unauthenticated) EvictLocked();
  const uint64_t id = next_id_++;
  conns_[id].sock = sock;
  conns_[id].since = std::chrono::steady_clock::now();
  ++usage_.unauthenticated;
  return id;
}

void ConnectionBudget::HeadersDone(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conns_.find(id);
  if (it != conns_.end()) it->second.headers_done = true;
}

bool ConnectionBudget::EvictOldest() {
  std::lock_guard<std::mutex> lock(mu_);
  return EvictLocked();
}

bool ConnectionBudget::EvictLocked() {
  // Those still sending their headers first, the ones that had time to
  // send them before the newest (idle or trickling sockets, not a client
  // whose request is being read), then the oldest of the rest (a body
  // trickling in, a token-less request).
  const auto settled = std::chrono::steady_clock::now() - kHeadersGrace;
  for (int pass = 0; pass < 3; ++pass) {
    for (auto& [id, c] : conns_) {
      if (c.charged || c.evicted || (pass < 2 && c.headers_done) || (pass == 0 && c.since > settled))
        continue;
      c.evicted = true;
      --usage_.unauthenticated;
      ++usage_.evicted;
      // Its worker sees the end of the stream and closes it; the socket
      // stays open (and its number unused) until that worker's Leave().
      ::shutdown(c.sock, SHUT_RDWR);
      return true;
    }
  }
  return false;
}

bool ConnectionBudget::Charge(uint64_t id, const ConnectionOwner& who, Refusal* why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second.evicted) {
    *why = {503, "E_BUSY", "the connection was closed to make room; try again"};
    return false;
  }
  Conn& c = it->second;
  if (c.charged) return true;
  auto refuse = [&](int status, const char* code, const std::string& message) {
    ++(status == 429 ? usage_.refused_identity : usage_.refused_busy);
    *why = {status, code, message};
    return false;
  };
  if (Count(per_token_, who.token_key) >= limits_.max_connections_per_token) {
    return refuse(429, "E_TOO_MANY_CONNECTIONS",
                  "this token already holds " + std::to_string(limits_.max_connections_per_token) +
                      " connections (the most one token may); close one or retry shortly");
  }
  if (who.staff) {
    if (usage_.staff >= limits_.max_staff_connections) {
      return refuse(503, "E_BUSY",
                    "every connection kept for approvers and operators is in use; retry shortly");
    }
  } else {
    if (Count(per_agent_, AgentKey(who.org, who.agent)) >= limits_.max_connections_per_agent) {
      return refuse(429, "E_TOO_MANY_CONNECTIONS",
                    "agent '" + who.agent + "' already holds " +
                        std::to_string(limits_.max_connections_per_agent) +
                        " connections (the most one agent may); close one or retry shortly");
    }
    if (Count(per_org_, who.org) >= limits_.max_connections_per_org) {
      return refuse(429, "E_TOO_MANY_CONNECTIONS",
                    "the agents of org '" + who.org + "' already hold " +
                        std::to_string(limits_.max_connections_per_org) + " connections; retry shortly");
    }
    if (usage_.agent >= limits_.max_agent_connections) {
      return refuse(503, "E_BUSY", "every connection agents may use is in use; retry shortly");
    }
  }
  c.charged = true;
  c.owner = who;
  --usage_.unauthenticated;
  ++per_token_[who.token_key];
  if (who.staff) {
    ++usage_.staff;
  } else {
    ++usage_.agent;
    ++per_agent_[AgentKey(who.org, who.agent)];
    ++per_org_[who.org];
  }
  return true;
}

void ConnectionBudget::Release(Conn& c) {
  if (!c.charged) {
    if (!c.evicted) --usage_.unauthenticated;
    return;
  }
  Drop(per_token_, c.owner.token_key);
  if (c.owner.staff) {
    --usage_.staff;
  } else {
    --usage_.agent;
    Drop(per_agent_, AgentKey(c.owner.org, c.owner.agent));
    Drop(per_org_, c.owner.org);
  }
}

void ConnectionBudget::Leave(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Release(it->second);
  conns_.erase(it);
}

ConnectionBudget::Usage ConnectionBudget::usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  return usage_;
}

int ConnectionBudget::org_connections(const std::string& org) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Count(per_org_, org);
}

int ConnectionBudget::agent_connections(const std::string& org, const std::string& agent) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Count(per_agent_, AgentKey(org, agent));
}

}  // namespace tollgate
