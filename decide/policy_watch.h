// The policy file as decide's Tick sees it (docs/policy.md, "Versions"):
// its mtime and size are checked, and its bytes read and hashed only when
// they changed; a file whose bytes changed is loaded and validated, and an
// empty one (a write in progress) is refused. A directory is a Duragent
// workspace (decide/duragent_policy.h): any of its files changing reloads
// it. A file
// that is refused (it does not load, or fails `validate`) is reported on
// stderr and its policy dropped; a missing one is reported once and the
// last valid policy seen stays. Either way the policy in force stays: the
// stage only emits what policy() holds. No locking: the stage calls it
// under its own mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "decide/policy_engine.h"

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

 private:
  void PollLayout(const PolicyInForce& in_force);  // `path` is a Duragent workspace
  void Refused(const Status& s, const PolicyInForce& in_force);
  // A loaded policy (`s` its load's status) validated, then put in force or refused.
  void Adopt(Status s, PolicyPtr p, const PolicyInForce& in_force);
  std::string path_;
  Validate validate_;
  int64_t mtime_ns_ = -1;
  int64_t size_ = -1;
  std::string bytes_hash_;
  std::string layout_stamp_;  // a workspace's files' paths, mtimes and sizes
  PolicyPtr policy_;
  std::string error_;
};

}  // namespace tollgate
