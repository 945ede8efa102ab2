// The policy file as decide's Tick sees it (docs/policy.md, "Versions"):
// its mtime and size are checked, and its bytes read and hashed only when
// they changed; a file whose bytes changed is loaded and validated, and an
// empty one (a write in progress) is refused. A directory is a Duragent
// workspace (decide/duragent_policy.h): any of its files changing reloads
// it. A file
// that is refused (it does not load, or fails `validate`) is reported on
// stderr with every problem (decide/policy_loader.h, CheckPolicyYaml), its
// policy dropped, and kept as the last refusal: the stage logs it once as
// policy.refused (TakeRefusedEvent) and /healthz shows it (Health). A
// missing file is reported once and the last valid policy seen stays.
// Either way the policy in force stays: the stage only emits what policy()
// holds. No locking: the stage calls it under its own mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/event.h"
#include "decide/policy_engine.h"
#include "decide/policy_loader.h"

namespace tollgate {

class PolicyFileWatch {
 public:
  // More checks a file must pass (DecideConfig::validate); null: none.
  using Validate = std::function<Status(const Json& policy_doc)>;
  PolicyFileWatch(std::string path, Validate validate)
      : path_(std::move(path)), validate_(std::move(validate)) {}

  // Looks at the file now. `in_force` only words the report of a refused
  // file ("the policy in force stays (version)").
  void Poll(const PolicyInForce& in_force);
  // The file's policy when it is valid, else null.
  const PolicyPtr& policy() const { return policy_; }
  // Why the file was refused or could not be read; "" when it is valid.
  const std::string& error() const { return error_; }

  // The last refused edit: the SHA-256 of its bytes (of a workspace's
  // paths and bytes), its problems (at most Problems' cap), when.
  struct Refusal {
    std::string file_sha256;
    std::vector<PolicyProblem> problems;
    int64_t time_us = 0;
  };
  const std::optional<Refusal>& last_refusal() const { return refusal_; }
  // The policy.refused event of the last refusal, once (docs/log_format.md
  // lists the type; schemas/event_data.policy.refused.schema.json): its id
  // is the refused bytes' hash and the hash in force, so a restart that
  // meets the same file refuses it into the log only once.
  std::optional<Event> TakeRefusedEvent(const PolicyInForce& in_force, int64_t now_us);
  // /healthz's "policy" (docs/http_api.md): {"in_force": {"version",
  // "content_hash"} or null, "file": "in_force" | "pending" | "refused" |
  // "missing" | "none", "last_refused": {"source", "file_sha256", "time",
  // "errors" (the first 5, placed "LINE:COL: message"), "errors_total"}
  // when a file was refused since start}.
  Json Health(const PolicyInForce& in_force) const;

 private:
  void PollLayout(const PolicyInForce& in_force);  // `path` is a Duragent workspace
  void Refused(std::vector<PolicyProblem> problems, const PolicyInForce& in_force);
  // A loaded policy (`problems` its check's) validated, then put in force or refused.
  void Adopt(std::vector<PolicyProblem> problems, PolicyPtr p, const PolicyInForce& in_force);
  std::string path_;
  Validate validate_;
  int64_t mtime_ns_ = -1;
  int64_t size_ = -1;
  std::string bytes_hash_;
  std::string layout_stamp_;  // a workspace's files' paths, mtimes and sizes
  PolicyPtr policy_;
  std::string error_;
  std::optional<Refusal> refusal_;
  bool refusal_logged_ = true;  // TakeRefusedEvent gave refusal_'s event
  bool missing_ = false;        // the file could not be stat'ed
};

}  // namespace tollgate
