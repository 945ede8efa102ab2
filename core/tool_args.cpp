#include "core/tool_args.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/messages.h"
#include "core/schema.h"
#include "core/tool_catalog.h"

namespace tollgate {
namespace {

// name -> compiled schema, for every built-in; built once.
const std::map<std::string, std::shared_ptr<const JsonSchema>, std::less<>>& Compiled() {
  static const auto* compiled = [] {
    auto* m = new std::map<std::string, std::shared_ptr<const JsonSchema>, std::less<>>();
    for (const ToolFacts& t : BuiltinTools()) {
      std::shared_ptr<const JsonSchema> s;
      // A schema of ours that does not compile is a programming error,
      // caught by tool_args_test; fail closed meanwhile (no entry = refuse).
      if (JsonSchema::Compile(Json::parse(InputSchemaOf(t.name)), &s).ok()) (*m)[std::string(t.name)] = s;
    }
    return m;
  }();
  return *compiled;
}

}  // namespace

Status CheckToolArgs(std::string_view tool, const Json& args) {
  if (FindBuiltinTool(tool) == nullptr) return Status::Ok();
  auto it = Compiled().find(tool);
  if (it == Compiled().end()) {
    return Status::Error(errc::kInvalidArgs, "the argument schema of '" + std::string(tool) + "' does not compile");
  }
  Status s = it->second->Validate(args);
  if (s.ok()) return s;
  // "/path: must be a string" -> "/args/path: ...": the field in the request.
  std::string m = s.message();
  m = m.rfind('/', 0) == 0 ? "/args" + m : "/args: " + m;
  return Status::Error(errc::kInvalidArgs, "args of " + std::string(tool) + " do not fit its schema: " + m);
}

}  // namespace tollgate
