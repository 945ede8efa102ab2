// The execute section of the deployment's policy source, which is a policy
// file or a Duragent workspace directory (decide/duragent_policy.h): for
// the places that read execute's settings (tools_dir, ...) before decide
// has logged a policy. Thread-safe.
#pragma once

#include <string>

#include "core/status.h"
#include "execute/config.h"

namespace tollgate {

// LoadExecutePolicy(path) for a file; for a directory, the execute
// section of its translated document (tools_dir, agents_dir,
// declared_tools included). Errors as those loaders give them.
Status LoadDeploymentExecutePolicy(const std::string& path, const std::string& data_dir, ExecutePolicy* out);

}  // namespace tollgate
