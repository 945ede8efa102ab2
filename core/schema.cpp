#include "core/schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <span>
#include <tuple>

// Valijson reports broken schemas by exception when this is set, and by
// abort() otherwise; we want to name the schema before giving up. Only this
// file includes valijson, so the setting is the same everywhere.
#define VALIJSON_USE_EXCEPTIONS 1
// GCC 12 reports a false -Wrestrict inside std::string::replace as inlined
// from valijson's JSON-pointer code (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "schemas/embedded_schemas.h"

namespace tollgate {

namespace {

constexpr std::string_view kFileSuffix = ".schema.json";
constexpr std::string_view kEventDataPrefix = "event_data.";
constexpr int kMaxRefDepth = 32;      // far beyond any real nesting; stops cycles
constexpr size_t kMaxEchoBytes = 64;  // of a field name or type quoted in a message

using Docs = std::map<std::string, Json, std::less<>>;

// Returns `node`, a part of document `doc`, with every {"$ref": ...}
// replaced by the schema it points to. Refs are "#/pointer" (same document),
// "NAME.schema.json" or "NAME.schema.json#/pointer" (another embedded
// schema). Inlining makes each schema self-contained, so valijson never
// fetches documents (its relative-URI resolution is a placeholder that
// concatenates strings) and the error explainer below walks one plain
// document instead of following refs itself.
bool InlineRefs(const Docs& docs, const Json& doc, const Json& node, int depth, Json* out,
                std::string* error) {
  if (depth > kMaxRefDepth) {
    *error = "$ref chain deeper than " + std::to_string(kMaxRefDepth) + " (a cycle?)";
    return false;
  }
  if (node.is_object()) {
    auto ref = node.find("$ref");
    if (ref != node.end() && ref->is_string()) {
      const std::string& text = ref->get_ref<const std::string&>();
      const size_t hash = text.find('#');
      const std::string file = text.substr(0, hash);
      const std::string pointer = hash == std::string::npos ? "" : text.substr(hash + 1);
      const Json* target_doc = &doc;
      if (!file.empty()) {
        auto it = file.ends_with(kFileSuffix)
                      ? docs.find(std::string_view(file).substr(0, file.size() - kFileSuffix.size()))
                      : docs.end();
        if (it == docs.end()) {
          *error = "$ref '" + text + "' names no embedded schema";
          return false;
        }
        target_doc = &it->second;
      }
      const Json* target = nullptr;
      try {
        target = &target_doc->at(Json::json_pointer(pointer));
      } catch (const Json::exception&) {
        *error = "$ref '" + text + "' points at nothing";
        return false;
      }
      return InlineRefs(docs, *target_doc, *target, depth + 1, out, error);
    }
    Json result = Json::object();
    for (const auto& [key, value] : node.items()) {
      if (!InlineRefs(docs, doc, value, depth, &result[key], error)) return false;
    }
    *out = std::move(result);
    return true;
  }
  if (node.is_array()) {
    Json result = Json::array();
    for (const Json& value : node) {
      result.push_back(Json());
      if (!InlineRefs(docs, doc, value, depth, &result.back(), error)) return false;
    }
    *out = std::move(result);
    return true;
  }
  *out = node;
  return true;
}

// ---- Turning valijson's findings into one message that names the field.

// Valijson's errors that only summarise errors of subschemas reported
// alongside ("Failed to validate against any schemas allowed by anyOf").
bool IsSummary(const std::string& description) { return description.starts_with("Failed to validate"); }

// The subschemas of `schema` that apply to the value at `path`: through
// properties, additionalProperties, items and the combinators. The outer
// ones come first.
void ApplicableSchemas(const Json& schema, std::span<const std::string> path, std::vector<const Json*>* out) {
  if (!schema.is_object()) return;
  if (path.empty()) out->push_back(&schema);
  for (const char* key : {"allOf", "anyOf", "oneOf"}) {
    auto it = schema.find(key);
    if (it == schema.end() || !it->is_array()) continue;
    for (const Json& sub : *it) ApplicableSchemas(sub, path, out);
  }
  for (const char* key : {"then", "else"}) {
    auto it = schema.find(key);
    if (it != schema.end()) ApplicableSchemas(*it, path, out);
  }
  if (path.empty()) return;
  const std::string& field = path.front();
  const auto rest = path.subspan(1);
  auto props = schema.find("properties");
  if (props != schema.end() && props->is_object() && props->contains(field)) {
    ApplicableSchemas(props->at(field), rest, out);
  } else if (auto extra = schema.find("additionalProperties"); extra != schema.end()) {
    ApplicableSchemas(*extra, rest, out);
  }
  if (auto items = schema.find("items"); items != schema.end()) ApplicableSchemas(*items, rest, out);
}

// The value of `keyword` in the first applicable subschema that has it.
const Json* FindKeyword(const std::vector<const Json*>& schemas, const char* keyword) {
  for (const Json* s : schemas) {
    auto it = s->find(keyword);
    if (it != s->end()) return &*it;
  }
  return nullptr;
}

const Json* ValueAt(const Json& doc, std::span<const std::string> path) {
  const Json* v = &doc;
  for (const std::string& token : path) {
    if (v->is_object()) {
      auto it = v->find(token);
      if (it == v->end()) return nullptr;
      v = &*it;
    } else if (v->is_array()) {
      size_t index = 0;
      auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
      if (ec != std::errc() || end != token.data() + token.size() || index >= v->size()) return nullptr;
      v = &(*v)[index];
    } else {
      return nullptr;
    }
  }
  return v;
}

std::string TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::string:
      return "string";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    default:
      return "value";
  }
}

// Field names come from the document, i.e. from anyone: keep them short and
// printable in a message that ends up in the log.
std::string Echo(std::string_view text) {
  std::string out = ToValidUtf8(text.substr(0, kMaxEchoBytes));
  if (text.size() > kMaxEchoBytes) out += "...";
  return out;
}

// The text between the last pair of single quotes of a valijson message.
std::string QuotedName(const std::string& description) {
  const size_t close = description.rfind('\'');
  const size_t open =
      close == std::string::npos || close == 0 ? std::string::npos : description.rfind('\'', close - 1);
  if (open == std::string::npos) return "";
  return description.substr(open + 1, close - open - 1);
}

std::string JoinTypes(const std::vector<const Json*>& schemas) {
  std::vector<std::string> types;
  for (const Json* s : schemas) {
    auto it = s->find("type");
    if (it == s->end()) continue;
    const Json listed = it->is_array() ? *it : Json::array({*it});
    for (const Json& t : listed) {
      if (t.is_string() && std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    }
  }
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i > 0) out += i + 1 == types.size() ? " or " : ", ";
    out += types[i];
  }
  return out.empty() ? "another type" : out;
}

// What is wrong with the value at `path`, in words, from valijson's
// `description` and the schema. Document values are never quoted (they may
// be secrets); field names and schema facts are.
std::string Describe(const Json& schema, const Json& doc, std::span<const std::string> path,
                     const std::string& description) {
  std::vector<const Json*> schemas;
  ApplicableSchemas(schema, path, &schemas);
  auto number = [&](const char* keyword) {
    const Json* v = FindKeyword(schemas, keyword);
    return v ? v->dump() : std::string("?");
  };

  if (description.starts_with("Missing required property")) {
    return "missing required field '" + Echo(QuotedName(description)) + "'";
  }
  if (description.starts_with("Object contains a property that could not be validated")) {
    return "unknown field '" + Echo(QuotedName(description)) + "'";
  }
  if (description.starts_with("Value type not permitted")) {
    const Json* value = ValueAt(doc, path);
    return "expected " + JoinTypes(schemas) + ", got " + (value ? TypeName(*value) : "another type");
  }
  if (description.starts_with("Failed to match against any enum values")) {
    const Json* values = FindKeyword(schemas, "enum");
    std::string list;
    if (values != nullptr && values->is_array()) {
      for (const Json& v : *values) list += (list.empty() ? "" : ", ") + v.dump();
    }
    return "must be one of " + list;
  }
  if (description.starts_with("Failed to match expected value set by 'const'")) {
    const Json* value = FindKeyword(schemas, "const");
    return "must be " + (value ? value->dump() : std::string("a fixed value"));
  }
  if (description.starts_with("Failed to match regex")) {
    for (const Json* s : schemas) {
      if (!s->contains("pattern")) continue;
      auto what = s->find("description");
      if (what != s->end() && what->is_string()) return "must be " + what->get<std::string>();
      return "must match the pattern " + (*s)["pattern"].dump();
    }
  }
  if (description.starts_with("String should be no fewer than")) {
    const std::string n = number("minLength");
    return n == "1" ? "must not be empty" : "must be at least " + n + " characters long";
  }
  if (description.starts_with("String should be no more than")) {
    return "must be at most " + number("maxLength") + " characters long";
  }
  if (description.starts_with("Expected number greater than or equal to"))
    return "must be >= " + number("minimum");
  if (description.starts_with("Expected number greater than"))
    return "must be > " + number("exclusiveMinimum");
  if (description.starts_with("Expected number less than or equal to"))
    return "must be <= " + number("maximum");
  if (description.starts_with("Expected number less than")) return "must be < " + number("exclusiveMaximum");

  // Anything else: valijson's own words, as a clause.
  std::string out = description;
  if (!out.empty()) out[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[0])));
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

// RFC 6901: "~" and "/" inside a token are escaped.
std::string PointerToken(const std::string& token) {
  std::string out;
  for (char c : Echo(token)) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// One line for the most specific error: the deepest one that is not a mere
// summary, a type error before others on the same value, the first reported
// among equals. `prefix` is the JSON pointer of
// `doc` inside a larger document ("/data" for event data).
std::string Explain(const Json& schema, const Json& doc, const valijson::ValidationResults& results,
                    const std::string& prefix) {
  const valijson::ValidationResults::Error* best = nullptr;
  // A wrong type outranks what else is wrong with the same value: an enum
  // or pattern mismatch is only a consequence.
  auto rank = [](const valijson::ValidationResults::Error& e) {
    return std::make_tuple(!IsSummary(e.description), e.context.size(),
                           e.description.starts_with("Value type not permitted"));
  };
  for (const auto& e : results) {
    if (best == nullptr || rank(e) > rank(*best)) best = &e;
  }
  if (best == nullptr) return "does not match the schema";

  // valijson's context is {"<root>", "[field]", "[0]", ...}.
  std::vector<std::string> path;
  for (const std::string& c : best->context) {
    if (c.size() >= 2 && c.front() == '[' && c.back() == ']') path.push_back(c.substr(1, c.size() - 2));
  }
  std::string pointer = prefix;
  for (const std::string& token : path) {
    pointer += '/';
    pointer += PointerToken(token);
  }
  const std::string what = Describe(schema, doc, path, best->description);
  return pointer.empty() ? what : pointer + ": " + what;
}

}  // namespace

struct SchemaRegistry::Impl {
  struct Entry {
    Json doc;  // refs inlined; the explainer reads it
    valijson::Schema schema;
  };
  std::map<std::string, std::unique_ptr<Entry>, std::less<>> entries;

  // Whether every string and key in `v` is valid UTF-8 (RFC 3629: no
  // overlong forms, surrogates or code points past U+10FFFF); *where is
  // the JSON pointer of the first that is not.
  static bool Utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        ++i;
        continue;
      }
      size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
      if (n == 0 || i + n > s.size()) return false;
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
          (c == 0xF4 && c1 > 0x8F)) {
        return false;
      }
      for (size_t k = 1; k < n; ++k) {
        if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
      }
      i += n;
    }
    return true;
  }
  static bool AllUtf8(const Json& v, std::string* where) {
    if (v.is_string()) return Utf8(v.get_ref<const std::string&>());
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (!AllUtf8(v[i], where)) {
          *where = "/" + std::to_string(i) + *where;
          return false;
        }
      }
    } else if (v.is_object()) {
      for (const auto& [k, child] : v.items()) {
        if (!Utf8(k) || !AllUtf8(child, where)) {
          *where = "/" + ToValidUtf8(k) + *where;
          return false;
        }
      }
    }
    return true;
  }

  const Entry* Find(std::string_view name) const {
    auto it = entries.find(name);
    return it == entries.end() ? nullptr : it->second.get();
  }

  static Status Check(const Entry& entry, const Json& doc, const std::string& prefix) {
    // valijson measures strings (minLength, maxLength) by decoding UTF-8
    // with a table that invalid bytes index out of bounds (found by
    // fuzz_policy: YAML strings are not checked the way JSON text is).
    std::string where;
    if (!AllUtf8(doc, &where)) {
      return Status::Error(errc::kInvalidUtf8, prefix + where + ": a string is not valid UTF-8");
    }
    // One validator per thread: it caches compiled patterns and is not
    // thread-safe; the parsed schemas are only read.
    static thread_local valijson::Validator validator;
    valijson::adapters::NlohmannJsonAdapter target(doc);
    try {
      // The fast path stops at the first failure; only a failing document
      // pays for the exhaustive second pass that finds the best message.
      if (validator.validate(entry.schema, target, nullptr)) return Status::Ok();
      valijson::ValidationResults results;
      validator.validate(entry.schema, target, &results);
      return Status::Error(errc::kSchemaViolation, Explain(entry.doc, doc, results, prefix));
    } catch (const std::exception& e) {
      // Only a defective schema gets here (a pattern std::regex refuses);
      // the document is refused rather than waved through.
      return Status::Error(errc::kSchemaViolation, "schema cannot be applied: " + ToValidUtf8(e.what()));
    }
  }
};

namespace {

// The embedded schemas are part of the binary: one that does not load is a
// build defect (schema_test catches it), and running with part of the
// contract missing would be worse than not starting.
[[noreturn]] void DieBadSchema(std::string_view name, const std::string& why) {
  std::fprintf(stderr, "tollgate: embedded schema '%.*s' is broken: %s\n", static_cast<int>(name.size()),
               name.data(), why.c_str());
  std::abort();
}

}  // namespace

SchemaRegistry::SchemaRegistry() : impl_(std::make_unique<Impl>()) {
  Docs docs;
  for (const auto& [name, text] : EmbeddedSchemas()) {
    Json doc;
    Status s = ParseJson(text, &doc);
    if (!s.ok()) DieBadSchema(name, s.message());
    docs.emplace(std::string(name), std::move(doc));
  }
  for (const auto& [name, doc] : docs) {
    auto entry = std::make_unique<Impl::Entry>();
    std::string error;
    if (!InlineRefs(docs, doc, doc, 0, &entry->doc, &error)) DieBadSchema(name, error);
    try {
      valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
      parser.populateSchema(valijson::adapters::NlohmannJsonAdapter(entry->doc), entry->schema);
    } catch (const std::exception& e) {
      DieBadSchema(name, e.what());
    }
    impl_->entries.emplace(name, std::move(entry));
  }
}

SchemaRegistry::~SchemaRegistry() = default;

const SchemaRegistry& SchemaRegistry::Builtin() {
  static const SchemaRegistry* registry = new SchemaRegistry();  // never destroyed: used until exit
  return *registry;
}

std::vector<std::string> SchemaRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : impl_->entries) names.push_back(name);
  return names;
}

Status SchemaRegistry::Validate(std::string_view name, const Json& doc) const {
  const Impl::Entry* entry = impl_->Find(name);
  if (entry == nullptr) return Status::Error(errc::kNotFound, "no schema named '" + Echo(name) + "'");
  return impl_->Check(*entry, doc, "");
}

Status SchemaRegistry::ValidateEvent(const Json& event) const {
  // An unknown type gets its own code, before the envelope check would call
  // it a bad enum value: a reader can then tell an event from a newer
  // version apart from a damaged one.
  const Impl::Entry* data_schema = nullptr;
  if (event.is_object()) {
    auto type = event.find("type");
    if (type != event.end() && type->is_string() && !type->get_ref<const std::string&>().empty()) {
      const std::string& t = type->get_ref<const std::string&>();
      data_schema = impl_->Find(std::string(kEventDataPrefix) + t);
      if (data_schema == nullptr) {
        return Status::Error(errc::kUnknownEventType, "unknown event type '" + Echo(t) + "'");
      }
    }
  }
  Status s = Validate("event", event);
  if (!s.ok()) return s;
  // The envelope requires a known type and an object "data", so both exist.
  if (data_schema == nullptr) return Status::Error(errc::kSchemaViolation, "/type: no data schema");
  return impl_->Check(*data_schema, event["data"], "/data");
}

struct JsonSchema::Impl {
  SchemaRegistry::Impl::Entry entry;
  // Whether a keyword is checked with std::regex, whose matcher recurses
  // once per character: a long enough string overflows the stack (libstdc++;
  // ~100,000 characters against "^[a-z]+$" on an 8 MiB stack).
  bool regex = false;
};

namespace {

constexpr size_t kMaxRegexInput = 4096;  // bytes of a string or key a pattern is applied to

bool UsesRegex(const Json& schema) {
  if (schema.is_object()) {
    for (const auto& [k, v] : schema.items()) {
      if (k == "pattern" || k == "patternProperties" || k == "format" || UsesRegex(v)) return true;
    }
  } else if (schema.is_array()) {
    for (const Json& v : schema) {
      if (UsesRegex(v)) return true;
    }
  }
  return false;
}

// The JSON pointer of the first string or key longer than kMaxRegexInput.
bool LongString(const Json& v, std::string* where) {
  if (v.is_string()) return v.get_ref<const std::string&>().size() > kMaxRegexInput;
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (LongString(v[i], where)) {
        *where = "/" + std::to_string(i) + *where;
        return true;
      }
    }
  } else if (v.is_object()) {
    for (const auto& [k, child] : v.items()) {
      if (k.size() > kMaxRegexInput || LongString(child, where)) {
        *where = "/" + PointerToken(k.substr(0, 64)) + *where;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

JsonSchema::JsonSchema() : impl_(std::make_unique<Impl>()) {}
JsonSchema::~JsonSchema() = default;
const Json& JsonSchema::doc() const { return impl_->entry.doc; }

Status JsonSchema::Compile(const Json& schema, std::shared_ptr<const JsonSchema>* out) {
  if (!schema.is_object()) return Status::Error(errc::kSchemaViolation, "a schema must be an object");
  std::shared_ptr<JsonSchema> s(new JsonSchema());
  std::string error;
  if (!InlineRefs(Docs(), schema, schema, 0, &s->impl_->entry.doc, &error)) {
    return Status::Error(errc::kSchemaViolation, error);
  }
  try {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    parser.populateSchema(valijson::adapters::NlohmannJsonAdapter(s->impl_->entry.doc),
                          s->impl_->entry.schema);
  } catch (const std::exception& e) {
    return Status::Error(errc::kSchemaViolation, "not a usable JSON Schema: " + ToValidUtf8(e.what()));
  }
  s->impl_->regex = UsesRegex(s->impl_->entry.doc);
  *out = std::move(s);
  return Status::Ok();
}

Status JsonSchema::Validate(const Json& doc) const {
  std::string where;
  if (impl_->regex && LongString(doc, &where)) {
    return Status::Error(errc::kSchemaViolation, where + ": longer than " + std::to_string(kMaxRegexInput) +
                                                     " bytes, more than a schema with patterns checks");
  }
  return SchemaRegistry::Impl::Check(impl_->entry, doc, "");
}

}  // namespace tollgate
