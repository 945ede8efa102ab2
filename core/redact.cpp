#include "core/redact.h"

#include <algorithm>
#include <cctype>

namespace tollgate {

const std::vector<std::string>& DefaultSecretKeyPatterns() {
  static const std::vector<std::string> kPatterns = {
      "authorization", "password", "passwd", "secret", "token", "api_key", "apikey",
      "cookie", "private_key", "credential", "session_key", "access_key"};
  return kPatterns;
}

std::vector<std::string> RedactSecrets(Json& value, const std::vector<std::string>& patterns, const std::string& path) {
  std::vector<std::string> out;
  if (value.is_object()) {
    for (auto& [key, child] : value.items()) {
      std::string lower = key;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      std::string escaped;  // JSON pointer: ~ -> ~0, / -> ~1
      for (char c : key) escaped += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
      const std::string child_path = path + "/" + escaped;
      if (std::any_of(patterns.begin(), patterns.end(),
                      [&](const std::string& p) { return lower.find(p) != std::string::npos; })) {
        child = "[REDACTED]";
        out.push_back(child_path);
      } else {
        auto more = RedactSecrets(child, patterns, child_path);
        out.insert(out.end(), more.begin(), more.end());
      }
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      auto more = RedactSecrets(value[i], patterns, path + "/" + std::to_string(i));
      out.insert(out.end(), more.begin(), more.end());
    }
  }
  return out;
}

}  // namespace tollgate
