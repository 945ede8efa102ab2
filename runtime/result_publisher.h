// ResultPublisher: the last step of every result on its way out
// (docs/trust.md, "Results are signed by the gate").
//
// Stages address results to the logical topic Topics::results(); the stage
// runner and the reconciler hand each such output to Route, which signs it
// with the gate key (core/result_signature.h) and sends it to its org's
// topic, Topics::results_for(org), creating that topic the first time.
// A stage never chooses an org's topic and never holds the key: the
// runtime does it once, for every stage and both deployments.
//
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/jwt.h"
#include "core/message.h"
#include "core/status.h"
#include "runtime/kafka_bus.h"

namespace tollgate {

class ResultPublisher {
 public:
  ResultPublisher(BusConfig bus, std::shared_ptr<const JwtSigner> gate)
      : bus_(std::move(bus)), gate_(std::move(gate)) {}

  // For a message on bus.topics.results(): signs it and moves it to its
  // org's topic (made when missing: E_KAFKA if that fails, and the caller
  // retries). Any other message is left as it is. A result whose value
  // names no org (never made by a stage) stays where it is, unsigned:
  // no waiter believes it.
  // `parsed`, when given, is m->value parsed (StageOutput::value_json).
  Status Route(Message* m, const Json* parsed = nullptr);
  // The org result topics that exist now (for the runner's read-back).
  Status ExistingTopics(std::vector<std::string>* out) const;

 private:
  BusConfig bus_;
  std::shared_ptr<const JwtSigner> gate_;
  std::mutex mu_;
  std::set<std::string> ensured_;  // guarded by mu_
};

}  // namespace tollgate
