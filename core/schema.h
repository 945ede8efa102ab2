// JSON Schema (draft-07) validation of the public contract, via valijson.
//
// The schemas in schemas/*.json are compiled into the binary, so validation
// needs no files at run time. Thread-safe after construction: Validate() is
// const and may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

class SchemaRegistry {
 public:
  // The schemas shipped in schemas/, parsed once on first use.
  static const SchemaRegistry& Builtin();

  // Names of the loaded schemas (file names without ".schema.json").
  std::vector<std::string> Names() const;

  // OK when `doc` conforms to schema `name`; otherwise E_SCHEMA_VIOLATION
  // whose message names the offending field as a JSON pointer and says what
  // is wrong ("/args: must be an object"). Unknown `name` yields E_NOT_FOUND.
  Status Validate(std::string_view name, const Json& doc) const;

  // Validates a full event: the envelope schema, then the data schema of the
  // event's type. Unknown types yield E_UNKNOWN_EVENT_TYPE.
  Status ValidateEvent(const Json& event) const;

  ~SchemaRegistry();
  SchemaRegistry(const SchemaRegistry&) = delete;
  SchemaRegistry& operator=(const SchemaRegistry&) = delete;

 private:
  friend class JsonSchema;
  SchemaRegistry();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A schema that is not one of ours: an http_request alias's input_schema
// from the policy file (core/http_alias.h). "#/..." refs are inlined; a ref
// to another document is refused (nothing is ever fetched). Immutable after
// Compile; Validate is thread-safe.
class JsonSchema {
 public:
  // E_SCHEMA_VIOLATION naming what is wrong when `schema` cannot be used.
  static Status Compile(const Json& schema, std::shared_ptr<const JsonSchema>* out);
  // As SchemaRegistry::Validate: the message names the field, never its
  // value. When the schema has a pattern (or format), a string or key over
  // 4096 bytes is refused unchecked: std::regex would overflow the stack.
  Status Validate(const Json& doc) const;
  const Json& doc() const;

  ~JsonSchema();
  JsonSchema(const JsonSchema&) = delete;
  JsonSchema& operator=(const JsonSchema&) = delete;

 private:
  JsonSchema();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate
