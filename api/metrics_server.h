// GET /metrics alone, on its own loopback port, for a `tollgate stage`
// process: each process of the distributed deployment exposes its own
// runner's figures (docs/operations.md). Access as the API's /metrics: an
// operator or admin token of the log's credentials, or none when public;
// an org's token sees its org's series only (MetricsVisibleTo).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/credentials.h"
#include "core/status.h"

namespace tollgate {

class MetricsServer {
 public:
  // `listen`: "HOST:PORT" (port 0: any free port). `render` is called per
  // scrape; `credentials` must outlive the server.
  static Status Start(const std::string& listen, const CredentialRegistry* credentials, bool public_access,
                      std::function<std::string()> render, std::unique_ptr<MetricsServer>* out);
  ~MetricsServer();
  std::string url() const;

 private:
  struct Impl;
  MetricsServer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate
