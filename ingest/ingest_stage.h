// The ingest stage: the pipeline's front door.
//
// For each message on tollgate.requests: authenticate the sender (its
// tollgate-auth signature, docs/trust.md), enforce the size limit, parse,
// validate against schemas/tool_request, derive a request_id when the agent
// gave none (from the message's Kafka coordinates), de-duplicate by
// request_id, redact secrets, stamp received_at, then append
// request.received and forward the request (secrets intact, for the
// executor) to tollgate.decide. Anything wrong yields request.rejected in
// the log and a `rejected` result with a specific code. From authentication
// on, the verified (org, agent) is the request's identity: the body must
// name the same. A request the signature does not prove is refused under
// org "unknown" and an id derived from its bytes, result included
// (core/unproven.h; what it claimed in data.claimed), never under the ids
// it names; past a few per window such refusals are counted into a summary
// (RefusalLimiter, made by Tick) rather than logged one by one.
// request_ids are scoped by org. A signed request without one gets
// "j-" + a hash of its signature, so a replayed copy is the same request.
// The agent's `traceparent` header, when well-formed, is the request's
// trace; without one ingest starts a trace (core/trace.h). Both events and
// outputs carry it.
//
// De-duplication by request_id, from the log:
//   - same id, same content, same Kafka message (a replay after a crash):
//     forward again, exactly as before;
//   - same id, same content, another message (an agent's retry): no second
//     execution; a finished request gets its recorded result again (tool
//     data as logged, secrets redacted), one in flight gets nothing new;
//   - same id, other content: rejected with E_DUPLICATE_REQUEST.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/auth.h"
#include "core/credentials.h"
#include "core/message.h"
#include "core/redact.h"
#include "core/stage.h"
#include "core/unproven.h"

namespace tollgate {

struct IngestConfig {
  Topics topics;
  size_t max_request_bytes = 1 << 20;
  // Object keys whose lower-cased name contains one of these are redacted
  // (at any depth of args and metadata) before anything is logged.
  std::vector<std::string> redact_key_patterns = DefaultSecretKeyPatterns();
  // The redaction rules in force (docs/redaction.md: by key and by value,
  // plus the policy's redact section); when set, used instead of
  // redact_key_patterns. Null: those keys and the built-in value scanner.
  std::shared_ptr<RedactorInForce> redactor;
  // The agents' keys (docs/trust.md). Null: every request is refused
  // (E_UNAUTHENTICATED): there is no unsigned mode.
  const CredentialRegistry* credentials = nullptr;
  // How far a signature's iat may lie from the clock.
  int64_t max_skew_us = kDefaultMaxSkewUs;
  // How many refusals of unproven messages are logged one by one.
  RefusalLimiter::Options refusal_limits;
};

class IngestStage : public Stage {
 public:
  explicit IngestStage(IngestConfig config) : config_(std::move(config)), refusals_(config_.refusal_limits) {}
  std::string name() const override { return "ingest"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.requests()}; }
  std::vector<std::string> output_topics() const override {
    return {config_.topics.decide(), config_.topics.results()};
  }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;
  // The summaries of counted refusals that are due.
  StageResult Tick(const StageContext& ctx, const LogView& log) override {
    return refusals_.Tick(ctx.now_us, log);
  }

 private:
  struct Rejection {
    std::string code, message, discriminator;
    Json extra = Json::object();  // more event data (check)
  };
  // A refusal filed under the proven signer (`partial` names it).
  StageResult Reject(const Message& in, const StageContext& ctx, const Json& partial,
                     const std::string& request_id, Rejection why);
  // A refusal of what no signature proves: logged, or counted.
  StageResult RejectUnproven(const Message& in, const StageContext& ctx, const Json& said,
                             const std::string& request_id, const SignedBy& who);
  // Process's steps, in order (ingest_stage.cpp). Each returns the
  // message's result when it ends there (a refusal, a duplicate, a log that
  // cannot be read), nullopt to go on to the next.
  struct Intake;
  struct Normalised;
  std::optional<StageResult> Authenticate(Intake& m);              // 1. who sent it
  std::optional<StageResult> Parse(Intake& m);                     // 2. the message itself
  std::optional<StageResult> Normalise(Intake& m, Normalised* n);  // 3. the request as tollgate knows it
  std::optional<StageResult> Deduplicate(const Intake& m, const Normalised& n);  // 4. seen before?
  StageResult Record(const Intake& m, const Normalised& n);                      // 5. received
  // Reject under the signer, `m`'s source as the discriminator.
  StageResult Refuse(const Intake& m, const char* code, std::string message);
  IngestConfig config_;
  RefusalLimiter refusals_;
};

}  // namespace tollgate
