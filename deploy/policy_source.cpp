#include "deploy/policy_source.h"

#include <filesystem>

#include "decide/duragent_policy.h"

namespace tollgate {

Status LoadDeploymentExecutePolicy(const std::string& path, const std::string& data_dir, ExecutePolicy* out) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_directory(path, ec)) return LoadExecutePolicy(path, data_dir, out);
  Json doc;
  Status s = TranslateDuragentLayout(path, &doc);
  if (!s.ok()) return s;
  return ExecutePolicyFromJson(doc, data_dir, out);
}

}  // namespace tollgate
