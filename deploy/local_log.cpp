#include "deploy/local_log.h"

#include <algorithm>

#include "deploy/pipeline.h"

namespace tollgate {

Status LocalLog::Open(const PipelineOptions& options, std::unique_ptr<LocalLog>* out) {
  auto l = std::make_unique<LocalLog>();
  l->options.durability = options.durability;
  l->options.max_event_bytes = std::max(kDefaultMaxEventBytes, 2 * options.max_request_bytes + (64 << 10));
  Status s = EventLog::Open(options.data_dir + "/log", l->options, &l->log);
  if (!s.ok()) return s;
  l->cache = std::make_unique<RequestCache>();
  l->sink = std::make_unique<LogSink>(*l->log, l->cache.get());
  l->store_view = std::make_unique<StoreLogView>(l->log->store());
  l->view = std::make_unique<CachedLogView>(*l->cache, *l->store_view);
  l->history = std::make_unique<StoreHistory>(*l->log);
  l->credentials = std::make_unique<CredentialRegistry>();
  *out = std::move(l);
  return Status::Ok();
}

void LocalLog::FollowCredentials() {
  CredentialRegistry* reg = credentials.get();
  sink->AddListener([reg](const std::vector<Event>& events) { reg->ApplyAll(events); });
}

LocalLog::~LocalLog() {
  // The readers before the log they read.
  history.reset();
  view.reset();
  store_view.reset();
  sink.reset();
  cache.reset();
  log.reset();
}

}  // namespace tollgate
