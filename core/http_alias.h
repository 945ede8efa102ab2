// An http_request alias (docs/tools.md, "http_request aliases"): one call
// an operator configured under http_request.aliases.<name> (top level for
// every agent, agents.<id>.http_request for one), offered to the agent as a
// tool of its own, such as `create_ticket`. The operator fixes the method,
// the URL and the headers; the agent sends only arguments, checked against
// the alias's input_schema, that fill the URL's {placeholders} and become
// the JSON body or the query.
//
// Decide and execute both expand a call with ExpandHttpAlias, so the
// invocation decide matched and recorded ("http_request:POST https://...")
// is byte for byte the request execute sends. Pure, thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/canonical_json.h"
#include "core/schema.h"
#include "core/status.h"

namespace tollgate {

struct HttpAlias {
  std::string name;               // [a-z][a-z0-9_]*, never a built-in's name
  std::string description;        // what tools/list shows
  std::string method;             // upper case
  std::string url;                // may be relative to base_url; {name} placeholders after the host
  std::string send;               // "json" (the body), "query" or "none": where the other arguments go
  Json headers = Json::object();  // execute adds them; values may hold ${env:NAME}
  Json input_schema = {{"type", "object"}};  // as the policy gives it
  std::shared_ptr<const JsonSchema> schema;  // input_schema compiled
  // The url split at its placeholders, parsed once: literal text, or the
  // name of the argument that fills the place.
  struct UrlPart {
    std::string text;
    bool placeholder = false;
  };
  std::vector<UrlPart> url_parts;
  // A built-in alias (FindBuiltinHttpAlias): Kaizen's http_get and kin.
  // The agent gives the url, headers and data; only the method is fixed,
  // and it is no grant: allowed_methods, hosts and every rule still hold.
  bool builtin = false;
};

// Builds `out` from the policy's entry for `name` (already checked against
// schemas/policy.schema.json). E_POLICY_INVALID naming what is wrong: a
// built-in's name, a placeholder in the scheme or host, an unusable schema.
Status ParseHttpAlias(const std::string& name, const Json& spec, HttpAlias* out);

// The alias `name` of an http_request section (its "aliases" object); false
// when it has none of that name. A malformed entry is *error (and true).
bool FindHttpAlias(const Json& http_section, const std::string& name, HttpAlias* out, Status* error);

// Kaizen's built-in aliases, defined here rather than in a policy file:
// http_get, fetch_url, extract_links (GET), http_post (POST), http_put
// (PUT), http_delete (DELETE); null for any other name. Each has its
// catalog row (danger, category) and its schema (core/tool_schemas.cpp);
// a policy's `tools:` entry of its name changes its danger as for any
// built-in. Decide and execute resolve them as they resolve a configured
// alias, so the call is decided and sent as `http_request:METHOD url`.
const HttpAlias* FindBuiltinHttpAlias(std::string_view name);

// The http_request arguments ({url, method, json | query}) of a call to `a`
// with the agent's `args`. E_INVALID_ARGS naming the field when the args do
// not fit input_schema, a placeholder is missing, empty, "." or "..", or a
// query value is not a scalar. Placeholder values are percent-encoded (all
// but A-Z a-z 0-9 - . _ ~), so they never add a path segment or a query.
// A built-in alias gives {url, method, headers?, json | body?}: its args'
// url and headers as they are, `data` as the body (a string as is, an
// object as JSON).
Status ExpandHttpAlias(const HttpAlias& a, const Json& args, Json* http_args);

}  // namespace tollgate
