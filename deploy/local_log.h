// The local log a process holds, built in one place for both deployments:
// `up`'s log (DATA/log), or a stage process's copy of the events topic. It
// bundles the event log, the request cache, the sink the stages append
// through (and subscribe to), the views they read, the history they
// restore from, and the credential registry folded from it.
#pragma once

#include <memory>
#include <string>

#include "audit/event_log.h"
#include "audit/log_history.h"
#include "audit/log_sink.h"
#include "audit/request_cache.h"
#include "core/credentials.h"

namespace tollgate {

struct PipelineOptions;

struct LocalLog {
  // Opens options.data_dir/log: request.received carries the whole request,
  // so an event may be twice max_request_bytes plus room.
  static Status Open(const PipelineOptions& options, std::unique_ptr<LocalLog>* out);
  ~LocalLog();

  LogOptions options;
  std::unique_ptr<EventLog> log;
  // Stages read request histories from memory when the request began in
  // this process (audit/request_cache.h), else from the log.
  std::unique_ptr<RequestCache> cache;
  std::unique_ptr<LogSink> sink;
  std::unique_ptr<StoreLogView> store_view;  // reads the log itself
  std::unique_ptr<CachedLogView> view;       // what runners give the stages
  std::unique_ptr<StoreHistory> history;     // what stages restore from
  // Who may act (docs/trust.md). FollowCredentials() keeps it current with
  // every append through the sink; the deployment folds or writes the
  // initial credentials (deploy/identity.h, audit/credentials_log.h).
  std::unique_ptr<CredentialRegistry> credentials;
  void FollowCredentials();
};

}  // namespace tollgate
