// libFuzzer target: an agent's message on tollgate.requests, through the
// ingest stage exactly as the runner calls it (authenticate, parse, validate,
// redact, build events and outputs). The first input byte picks how the
// message is signed: 0-127 by a registered agent key over the exact bytes
// (so the fuzzer reaches everything after authentication), else the bytes up
// to the first newline are the tollgate-auth header, the rest the value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/auth.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "ingest/ingest_stage.h"

namespace tollgate {
namespace {

struct NoLog : LogView {
  Status EventsOfRequest(const std::string&, const std::string&, std::vector<Event>*) const override {
    return Status::Ok();
  }
};

struct World {
  CredentialRegistry registry;
  JwtSigner signer;
  std::unique_ptr<IngestStage> stage;
  World() {
    Credential c;
    if (!NewSigningKey("agent_key", "o", "a1", {"agent"}, "fuzz", &c, &signer).ok()) std::abort();
    registry.Apply(CredentialAddedEvent(c, 1'700'000'000'000'000));
    IngestConfig config;
    config.credentials = &registry;
    stage = std::make_unique<IngestStage>(std::move(config));
  }
};

}  // namespace
}  // namespace tollgate

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tollgate;
  static World* world = new World();
  if (size == 0) return 0;
  const bool sign = data[0] < 128;
  std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  Message m;
  m.topic = "tollgate.requests";
  m.key = "a1";
  const int64_t now_us = 1'800'000'000'000'000;
  if (sign) {
    m.value = rest;
    m.headers[kHeaderAuth] = SignRequest(world->signer, "o", "a1", "", m.value, now_us / 1'000'000);
  } else {
    const size_t nl = rest.find('\n');
    m.headers[kHeaderAuth] = rest.substr(0, nl);
    m.value = nl == std::string::npos ? "" : rest.substr(nl + 1);
  }
  StageContext ctx;
  ctx.now_us = now_us;
  ctx.source = "fuzz/tollgate.requests/0/0";
  NoLog log;
  StageResult r = world->stage->Process(m, ctx, log);
  // Every message ends as exactly one event: accepted or rejected, never lost.
  if (r.events.size() != 1) std::abort();
  return 0;
}
