// The ingest stage: the pipeline's front door.
//
// For each message on tollgate.requests: enforce the size limit, parse,
// validate against schemas/tool_request, derive a request_id when the agent
// gave none (from the message's Kafka coordinates), de-duplicate by
// request_id, redact secrets, stamp received_at, then append
// request.received and forward the request (secrets intact, for the
// executor) to tollgate.decide. Anything wrong yields request.rejected in
// the log and a `rejected` result with a specific code.
//
// De-duplication by request_id, from the log:
//   - same id, same content, same Kafka message (a replay after a crash):
//     forward again, exactly as before;
//   - same id, same content, another message (an agent's retry): no second
//     execution; a finished request gets its recorded result again (tool
//     data as logged, secrets redacted), one in flight gets nothing new;
//   - same id, other content: rejected with E_DUPLICATE_REQUEST.
#pragma once

#include <string>
#include <vector>

#include "core/kafka_bus.h"
#include "core/redact.h"
#include "core/stage.h"

namespace tollgate {

struct IngestConfig {
  Topics topics;
  size_t max_request_bytes = 1 << 20;
  // Object keys whose lower-cased name contains one of these are redacted
  // (at any depth of args and metadata) before anything is logged.
  std::vector<std::string> redact_key_patterns = DefaultSecretKeyPatterns();
};

class IngestStage : public Stage {
 public:
  explicit IngestStage(IngestConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "ingest"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.requests()}; }
  std::vector<std::string> output_topics() const override {
    return {config_.topics.decide(), config_.topics.results()};
  }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;

 private:
  StageResult Reject(const Message& in, const StageContext& ctx, const Json& partial,
                     const std::string& request_id, const std::string& code, const std::string& message,
                     const std::string& discriminator = "");
  IngestConfig config_;
};

}  // namespace tollgate
