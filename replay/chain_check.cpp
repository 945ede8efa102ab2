#include "replay/chain_check.h"

#include "audit/log_format.h"
#include "core/sha256.h"

namespace tollgate::replay {

std::vector<ChainProblem> CheckSessionChain(const std::vector<Event>& events, const LinkLookup& link_at) {
  std::vector<ChainProblem> problems;
  auto add = [&](uint64_t seq, const char* code, std::string msg) {
    problems.push_back({seq, Status::Error(code, std::move(msg))});
  };
  const std::string genesis = ToHex(kGenesisHash);
  for (const Event& e : events) {
    const std::string at = "seq " + std::to_string(e.seq);
    std::string body;
    Digest prev{};
    Status s = EncodeEventBody(e, SIZE_MAX, &body);
    if (!s.ok()) {
      add(e.seq, errc::kChainBroken, at + " does not re-encode: " + s.message());
      continue;
    }
    if (!DigestFromHex(e.prev_hash, &prev) || ToHex(logfmt::ChainHash(prev, body)) != e.hash) {
      add(e.seq, errc::kChainBroken, at + " hash does not match its contents");
    }
    if (e.seq == 1) {
      if (e.prev_hash != genesis)
        add(e.seq, errc::kChainBroken, at + " is the first record but does not link to genesis");
    } else {
      ChainLink before;
      s = link_at(e.seq - 1, &before);
      if (!s.ok())
        add(e.seq, s.code() == errc::kNotFound ? errc::kChainBroken : s.code().c_str(),
            at + ": the record before it cannot be read: " + s.message());
      else if (before.hash != e.prev_hash)
        add(e.seq, errc::kChainBroken, at + " prev_hash is not the hash of seq " + std::to_string(e.seq - 1));
    }
    ChainLink after;
    s = link_at(e.seq + 1, &after);
    if (s.ok()) {
      if (after.prev_hash != e.hash)
        add(e.seq, errc::kChainBroken, "seq " + std::to_string(e.seq + 1) + " does not link back to " + at);
    } else if (s.code() != errc::kNotFound) {
      add(e.seq, s.code().c_str(), at + ": the record after it cannot be read: " + s.message());
    }
  }
  return problems;
}

}  // namespace tollgate::replay
