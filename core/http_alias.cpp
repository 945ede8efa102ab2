#include "core/http_alias.h"

#include <algorithm>
#include <map>

#include "core/tool_catalog.h"
#include "core/url.h"

namespace tollgate {
namespace {

constexpr const char* kPolicyInvalid = "E_POLICY_INVALID";  // decide/policy_loader.h's code
constexpr const char* kInvalidArgs = "E_INVALID_ARGS";      // execute/tool.h's code

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64 || !(n[0] >= 'a' && n[0] <= 'z')) return false;
  return std::all_of(n.begin(), n.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

bool PlaceholderChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string Encode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Where the host ends in `url`: after "scheme://authority", or 0 for a
// relative reference (which must not be "//host...").
size_t PathStart(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return 0;
  const size_t slash = url.find_first_of("/?#", scheme + 3);
  return slash == std::string::npos ? url.size() : slash;
}

}  // namespace

Status ParseHttpAlias(const std::string& name, const Json& spec, HttpAlias* out) {
  const std::string at = "http_request.aliases." + name;
  if (!ValidName(name)) {
    return Status::Error(kPolicyInvalid, at + ": an alias name is [a-z][a-z0-9_]*, at most 64 characters");
  }
  if (name == "http_request" || FindBuiltinTool(name) != nullptr) {
    return Status::Error(kPolicyInvalid, at + ": '" + name + "' is a built-in tool's name");
  }
  if (!spec.is_object()) return Status::Error(kPolicyInvalid, at + ": must be an object");
  // Execute reads its own copy of the policy: types are checked here too.
  for (const char* k : {"description", "method", "url", "send"}) {
    if (spec.contains(k) && !spec[k].is_string())
      return Status::Error(kPolicyInvalid, at + "." + k + ": a string");
  }
  HttpAlias a;
  a.name = name;
  a.description = spec.value("description", "");
  a.method = spec.value("method", "");
  std::transform(a.method.begin(), a.method.end(), a.method.begin(), ::toupper);
  if (a.method.empty() || a.method.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos) {
    return Status::Error(kPolicyInvalid, at + ".method: a word such as GET or POST");
  }
  a.url = spec.value("url", "");
  if (a.url.empty()) return Status::Error(kPolicyInvalid, at + ".url: required");
  if (a.url.rfind("//", 0) == 0)
    return Status::Error(kPolicyInvalid, at + ".url: give the scheme or a path, not //host");
  const bool body = a.method == "POST" || a.method == "PUT" || a.method == "PATCH";
  a.send = spec.value("send", body ? "json" : "query");
  if (a.send != "json" && a.send != "query" && a.send != "none") {
    return Status::Error(kPolicyInvalid, at + ".send: json, query or none");
  }
  if (spec.contains("headers")) a.headers = spec["headers"];
  if (!a.headers.is_object()) return Status::Error(kPolicyInvalid, at + ".headers: an object of strings");
  if (spec.contains("input_schema")) a.input_schema = spec["input_schema"];
  if (Status s = JsonSchema::Compile(a.input_schema, &a.schema); !s.ok()) {
    return Status::Error(kPolicyInvalid, at + ".input_schema: " + s.message());
  }
  // {name} placeholders, only where they cannot change the host.
  const size_t path = PathStart(a.url);
  std::string probe;
  size_t literal = 0;  // where the literal text after the last placeholder starts
  for (size_t i = 0; i < a.url.size(); ++i) {
    if (a.url[i] == '}') return Status::Error(kPolicyInvalid, at + ".url: a '}' without its '{'");
    if (a.url[i] != '{') {
      probe += a.url[i];
      continue;
    }
    const size_t end = a.url.find('}', i);
    const std::string p = end == std::string::npos ? "" : a.url.substr(i + 1, end - i - 1);
    if (p.empty() || !std::all_of(p.begin(), p.end(), PlaceholderChar)) {
      return Status::Error(kPolicyInvalid,
                           at + ".url: a placeholder is {name}, name of letters, digits and _");
    }
    if (i < path) return Status::Error(kPolicyInvalid, at + ".url: {" + p + "} is in the scheme or host");
    a.url_parts.push_back({a.url.substr(literal, i - literal), false});
    a.url_parts.push_back({p, true});
    probe += "x";
    i = end;
    literal = end + 1;
  }
  if (literal < a.url.size()) a.url_parts.push_back({a.url.substr(literal), false});
  if (path > 0) {
    NormalUrl u;
    std::string why;
    if (!NormalizeUrl(probe, "", &u, &why)) return Status::Error(kPolicyInvalid, at + ".url: " + why);
  }
  *out = std::move(a);
  return Status::Ok();
}

const HttpAlias* FindBuiltinHttpAlias(std::string_view name) {
  static const auto* kAliases = [] {
    auto* m = new std::map<std::string, HttpAlias, std::less<>>();
    static const std::pair<const char*, const char*> kMethods[] = {
        {"http_get", "GET"},       {"http_post", "POST"}, {"http_put", "PUT"},
        {"http_delete", "DELETE"}, {"fetch_url", "GET"},  {"extract_links", "GET"}};
    for (const auto& [n, method] : kMethods) {
      HttpAlias a;
      a.name = n;
      a.method = method;
      a.builtin = true;
      a.send = "json";
      if (const ToolFacts* t = FindBuiltinTool(n)) a.description = std::string(t->description);
      a.input_schema = Json::parse(InputSchemaOf(n));
      // Ours: a schema that does not compile leaves the alias out, and the
      // call is then refused as an unknown one (kaizen_tools_test catches it).
      if (!JsonSchema::Compile(a.input_schema, &a.schema).ok()) continue;
      m->emplace(n, std::move(a));
    }
    return m;
  }();
  auto it = kAliases->find(name);
  return it == kAliases->end() ? nullptr : &it->second;
}

bool FindHttpAlias(const Json& http_section, const std::string& name, HttpAlias* out, Status* error) {
  if (!http_section.is_object()) return false;
  auto aliases = http_section.find("aliases");
  if (aliases == http_section.end() || !aliases->is_object()) return false;
  auto it = aliases->find(name);
  if (it == aliases->end()) return false;
  *error = ParseHttpAlias(name, *it, out);
  return true;
}

Status ExpandHttpAlias(const HttpAlias& a, const Json& args, Json* http_args) {
  if (!args.is_object()) return Status::Error(kInvalidArgs, "the arguments must be an object");
  if (Status s = a.schema->Validate(args); !s.ok()) {
    return Status::Error(kInvalidArgs,
                         "the arguments do not fit " + a.name + "'s input_schema: " + s.message());
  }
  if (a.builtin) {
    // Validated above: url a string, headers an object of strings, data
    // an object or a string.
    Json out{{"url", args["url"]}, {"method", a.method}};
    if (args.contains("headers")) out["headers"] = args["headers"];
    if (auto d = args.find("data"); d != args.end()) out[d->is_string() ? "body" : "json"] = *d;
    *http_args = std::move(out);
    return Status::Ok();
  }
  Json rest = args;
  std::string url;
  for (const HttpAlias::UrlPart& part : a.url_parts) {
    if (!part.placeholder) {
      url += part.text;
      continue;
    }
    const std::string& p = part.text;
    auto v = args.find(p);
    std::string text;
    if (v != args.end() && v->is_string()) {
      text = v->get<std::string>();
    } else if (v != args.end() && v->is_number()) {
      text = v->dump();
    } else {
      return Status::Error(kInvalidArgs, "/" + p + ": the URL needs it, as a string or a number");
    }
    if (text.empty() || text == "." || text == "..") {
      return Status::Error(kInvalidArgs, "/" + p + ": must not be empty, '.' or '..' (it is a path segment)");
    }
    url += Encode(text);
    rest.erase(p);
  }
  Json out{{"url", url}, {"method", a.method}};
  if (a.send == "json") {
    out["json"] = std::move(rest);
  } else if (a.send == "query") {
    for (const auto& [k, v] : rest.items()) {
      if (!v.is_string() && !v.is_number() && !v.is_boolean()) {
        return Status::Error(kInvalidArgs, "/" + k + ": " + a.name +
                                               " sends its arguments as a query: a string, "
                                               "number or boolean");
      }
    }
    if (!rest.empty()) out["query"] = std::move(rest);
  } else if (!rest.empty()) {
    return Status::Error(kInvalidArgs, "/" + rest.begin().key() + ": " + a.name + " takes no such argument");
  }
  *http_args = std::move(out);
  return Status::Ok();
}

}  // namespace tollgate
