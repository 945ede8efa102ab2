// Secret redaction: what the log must never hold in clear.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"

namespace tollgate {

// Key-name fragments that mark a secret (lower case).
const std::vector<std::string>& DefaultSecretKeyPatterns();

// Replaces, at any depth, the value of every object key whose lower-cased
// name contains one of `patterns` by "[REDACTED]"; returns the JSON pointers
// of what it replaced (under `path`).
std::vector<std::string> RedactSecrets(Json& value, const std::vector<std::string>& patterns,
                                       const std::string& path = "");

}  // namespace tollgate
