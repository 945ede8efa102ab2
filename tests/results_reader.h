// What an agent's result reader does, for tests: read the per-org results
// topics of some orgs and keep only what the gate signed
// (core/result_signature.h). Non-final `pending` messages are kept apart
// (pending()), so a test that waits for "the result" gets the final one.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/result_signature.h"
#include "runtime/kafka_bus.h"

namespace tollgate::testing {

inline const std::vector<std::string>& DefaultTestOrgs() {
  static const std::vector<std::string> kOrgs = {"org-1", "org-2", "default",  "unknown",
                                                 "o1",    "o2",    "org-crash"};
  return kOrgs;
}

class ResultsReader {
 public:
  // A group consumer (`group`) of the orgs' topics, from their start, or a
  // tail reader (group empty) of them from their current end.
  static Status Open(const BusConfig& bus, const std::string& gate_public_key, const std::string& group,
                     std::unique_ptr<ResultsReader>* out,
                     const std::vector<std::string>& orgs = DefaultTestOrgs()) {
    std::unique_ptr<ResultsReader> r(new ResultsReader());
    Status s = Ed25519Verifier::FromPublic(gate_public_key, &r->gate_);
    if (!s.ok()) return s;
    std::vector<std::string> topics;
    for (const std::string& org : orgs) {
      topics.push_back(bus.topics.results_for(org));
      s = EnsureTopic(bus, topics.back(), std::chrono::seconds(10));
      if (!s.ok()) return s;
    }
    if (group.empty()) {
      s = Consumer::OpenTail(bus, topics, std::chrono::seconds(10), &r->c_);
    } else {
      s = Consumer::Open(bus, group, topics, &r->c_);
    }
    if (!s.ok()) return s;
    *out = std::move(r);
    return Status::Ok();
  }

  // As Consumer::Poll, returning only final results the gate signed.
  Status Poll(size_t max, std::chrono::milliseconds timeout, std::vector<Message>* out) {
    std::vector<Message> batch;
    Status s = c_->Poll(max, timeout, &batch);
    for (Message& m : batch) {
      Json v;
      if (!ParseJson(m.value, &v).ok() || !v.is_object()) {
        ++refused_;
        continue;
      }
      Json r;
      if (!VerifyResult(m, {gate_}, {v.value("org_id", ""), "", v.value("request_id", "")}, &r).ok()) {
        ++refused_;
        continue;
      }
      if (!IsFinalStatus(r.value("status", ""))) {
        pending_.push_back(std::move(r));
        continue;
      }
      out->push_back(std::move(m));
    }
    return s;
  }
  // The signed pending messages read so far.
  const std::vector<Json>& pending() const { return pending_; }
  // Messages read that the gate did not sign.
  size_t refused() const { return refused_; }
  Consumer& consumer() { return *c_; }

 private:
  ResultsReader() = default;
  Ed25519Verifier gate_;
  std::unique_ptr<Consumer> c_;
  std::vector<Json> pending_;
  size_t refused_ = 0;
};

}  // namespace tollgate::testing
