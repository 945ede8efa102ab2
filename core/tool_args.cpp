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

const char* JsonType(const Json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  return "null";
}

bool TypeMatches(const Json& want, const Json& v) {
  if (want.is_array()) {
    for (const Json& w : want) {
      if (TypeMatches(w, v)) return true;
    }
    return false;
  }
  if (!want.is_string()) return true;
  const std::string t = want, got = JsonType(v);
  return t == got || (t == "number" && got == "integer");
}

}  // namespace

std::string CheckArgsShape(const Json& schema, const Json& args) {
  if (!schema.is_object()) return "";
  if (!args.is_object()) return "the arguments must be an object";
  if (auto req = schema.find("required"); req != schema.end() && req->is_array()) {
    for (const Json& k : *req) {
      if (k.is_string() && !args.contains(k.get<std::string>()))
        return "missing required argument '" + k.get<std::string>() + "'";
    }
  }
  const Json props = schema.value("properties", Json::object());
  const bool closed = schema.value("additionalProperties", Json(true)) == Json(false);
  for (auto it = args.begin(); it != args.end(); ++it) {
    auto p = props.is_object() ? props.find(it.key()) : props.end();
    if (!props.is_object() || p == props.end()) {
      if (closed) return "unknown argument '" + it.key() + "'";
      continue;
    }
    if (p->is_object() && p->contains("type") && !TypeMatches((*p)["type"], it.value())) {
      return "argument '" + it.key() + "' must be of type " + (*p)["type"].dump() + ", not " +
             JsonType(it.value());
    }
  }
  return "";
}

bool ToolTakesAction(std::string_view tool) {
  if (FindBuiltinTool(tool) == nullptr) return false;
  const Json schema = Json::parse(InputSchemaOf(tool));
  return schema.contains("properties") && schema["properties"].contains("action");
}

Status CheckToolArgs(std::string_view tool, const Json& args) {
  if (FindBuiltinTool(tool) == nullptr) return Status::Ok();
  auto it = Compiled().find(tool);
  if (it == Compiled().end()) {
    return Status::Error(errc::kInvalidArgs,
                         "the argument schema of '" + std::string(tool) + "' does not compile");
  }
  Status s = it->second->Validate(args);
  if (s.ok()) return s;
  // "/path: must be a string" -> "/args/path: ...": the field in the request.
  std::string m = s.message();
  m = m.rfind('/', 0) == 0 ? "/args" + m : "/args: " + m;
  return Status::Error(errc::kInvalidArgs, "args of " + std::string(tool) + " do not fit its schema: " + m);
}

}  // namespace tollgate
