// Loading a policy: YAML to JSON (remembering lines), schema validation,
// org sections, compiling and versions (decide/policy_loader.h).
#include "decide/policy_loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/event.h"
#include "core/redact.h"
#include "core/schema.h"
#include "core/sha256.h"
#include "decide/compiled_policy.h"
#include "decide/duragent_policy.h"
#include "decide/org_merge.h"
#include "decide/policy_compiler.h"

namespace tollgate {

// ---------------------------------------------------------------------------
// Names.
namespace {
const char* const kDangerNames[] = {"SAFE", "LOW", "MEDIUM", "HIGH", "CRITICAL"};
const char* const kModeNames[] = {"bypass", "plan", "ask", "restrict", "dangerous"};

// The enumerator whose name (in enumerator order in `names`) is `name`.
template <typename E, size_t N>
bool ParseName(std::string_view name, const char* const (&names)[N], E* out) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}
}  // namespace

const char* DangerName(DangerLevel d) { return kDangerNames[static_cast<int>(d)]; }
bool ParseDanger(std::string_view name, DangerLevel* out) { return ParseName(name, kDangerNames, out); }
const char* ModeName(Mode m) { return kModeNames[static_cast<int>(m)]; }
bool ParseMode(std::string_view name, Mode* out) {
  // The seeds' names (docs/policy.md, "Modes"): default is ask, strict is restrict.
  if (name == "default") name = "ask";
  if (name == "strict") name = "restrict";
  return ParseName(name, kModeNames, out);
}

Policy::Policy() = default;
Policy::~Policy() = default;

// ---------------------------------------------------------------------------
// YAML -> JSON, remembering the line of every JSON pointer.
namespace {

Json YamlScalar(const YAML::Node& n) {
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: always a string
  if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
  if (v == "true" || v == "True" || v == "TRUE") return true;
  if (v == "false" || v == "False" || v == "FALSE") return false;
  int64_t i = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
  if (ec == std::errc() && p == v.data() + v.size()) return i;
  double d = 0;
  auto [p2, ec2] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec2 == std::errc() && p2 == v.data() + v.size() && std::isfinite(d)) return d;
  return v;
}

// More than any real policy has: YAML aliases can make a few hundred bytes
// expand to billions of values, or a few kilobytes to gigabytes (one long
// string aliased many times), and a policy also arrives from the HTTP API
// (a what-if's candidate). Both caps are checked before a value is copied,
// so a bomb is refused after at most this much work.
constexpr size_t kMaxPolicyValues = 200'000;
// Scalars, keys and JSON pointers (the line map's) as expanded, in bytes.
constexpr size_t kMaxPolicyExpandedBytes = 8 << 20;

struct YamlBudget {
  size_t values = 0;
  size_t bytes = 0;
};

Status YamlToJson(const YAML::Node& n, const std::string& ptr, Json* out, LineMap* lines, int depth,
                  YamlBudget* budget) {
  if (depth > 64)
    return Status::Error(errc::kPolicyInvalid,
                         "line " + std::to_string(n.Mark().line + 1) + ": nested too deeply");
  if (++budget->values > kMaxPolicyValues) {
    return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(n.Mark().line + 1) + ": more than " +
                                                   std::to_string(kMaxPolicyValues) +
                                                   " values (aliases expanding?)");
  }
  budget->bytes += ptr.size() + 16 + (n.IsScalar() ? n.Scalar().size() : 0);
  if (budget->bytes > kMaxPolicyExpandedBytes) {
    return Status::Error(errc::kPolicyInvalid,
                         "line " + std::to_string(n.Mark().line + 1) + ": the policy expands to more than " +
                             std::to_string(kMaxPolicyExpandedBytes) + " bytes (aliases expanding?)");
  }
  (*lines)[ptr] = n.Mark().line + 1;
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      *out = nullptr;
      return Status::Ok();
    case YAML::NodeType::Scalar:
      *out = YamlScalar(n);
      return Status::Ok();
    case YAML::NodeType::Sequence: {
      *out = Json::array();
      size_t i = 0;
      for (const auto& item : n) {
        Json v;
        Status s = YamlToJson(item, ptr + "/" + std::to_string(i++), &v, lines, depth + 1, budget);
        if (!s.ok()) return s;
        out->push_back(std::move(v));
      }
      return Status::Ok();
    }
    case YAML::NodeType::Map: {
      *out = Json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) {
          return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(kv.first.Mark().line + 1) +
                                                         ": keys must be plain strings");
        }
        const std::string key = kv.first.Scalar();
        if (out->contains(key)) {
          return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(kv.first.Mark().line + 1) +
                                                         ": duplicate key '" + key + "'");
        }
        Json v;
        Status s = YamlToJson(kv.second, ptr + "/" + PointerToken(key), &v, lines, depth + 1, budget);
        if (!s.ok()) return s;
        (*out)[key] = std::move(v);
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// Schema messages look like "/agents/a1/mode: must be one of ...".
std::string LocateSchemaMessage(const LineMap* lines, const std::string& msg) {
  if (!msg.empty() && msg[0] == '/') {
    size_t colon = msg.find(": ");
    if (colon != std::string::npos) {
      std::string ptr = msg.substr(0, colon);
      return Where(lines, ptr) + msg;
    }
  }
  return msg;
}

std::string VersionOf(const Json& doc, Status* s) {
  std::string bytes;
  *s = CanonicalBytes(doc, &bytes);
  return "file:" + Sha256Hex(bytes).substr(0, 16);
}

}  // namespace

struct PolicyLoader {
  static Status Load(const Json& doc, const std::string& source, const LineMap* lines, PolicyPtr* out) {
    if (!doc.is_object()) {
      return Status::Error(errc::kPolicyInvalid, Where(lines, "") + "a policy must be a mapping (an object)");
    }
    // Org ids first: the schema's message for a bad property name names
    // no place (schemas/policy.schema.json says the same).
    if (doc.contains("orgs") && doc["orgs"].is_object()) {
      for (auto it = doc["orgs"].begin(); it != doc["orgs"].end(); ++it) {
        const std::string& org = it.key();
        const bool control = std::any_of(org.begin(), org.end(), [](char ch) {
          const auto c = static_cast<unsigned char>(ch);
          return c < 0x20 || c == 0x7f;
        });
        if (org.empty() || control || org.size() > kMaxIdBytes) {
          return Status::Error(errc::kPolicyInvalid,
                               Where(lines, "/orgs/" + PointerToken(org)) +
                                   "/orgs: an org id must be 1 to 256 bytes without control characters");
        }
      }
    }
    // An agent id is an org's: a top-level entry would bind that id in
    // every org (another org's `a1` would get these rules and aliases), so
    // it is refused with the spelling that says whose agent it is.
    if (auto a = doc.find("agents"); a != doc.end() && a->is_object() && !a->empty()) {
      const std::string id = a->begin().key();
      return Status::Error(errc::kPolicyInvalid,
                           Where(lines, "/agents/" + PointerToken(id)) + "/agents/" + PointerToken(id) +
                               ": an agent entry belongs to one org; a top-level one would apply to agent '" +
                               id + "' of every org. Write it under its org: orgs.<org>.agents." + id +
                               " (docs/policy.md, \"Agents belong to an org\")");
    }
    Status s = SchemaRegistry::Builtin().Validate("policy", doc);
    if (!s.ok()) return Status::Error(errc::kPolicyInvalid, LocateSchemaMessage(lines, s.message()));
    {
      // redact.values must compile: the stages apply them to everything logged.
      std::shared_ptr<const Redactor> redactor;
      s = Redactor::FromPolicy(doc, &redactor);
      if (!s.ok()) return Status::Error(errc::kPolicyInvalid, Where(lines, "/redact") + s.message());
    }
    auto p = std::make_shared<Policy>();
    try {
      // The deployment defaults (`orgs` is not read by the compiler).
      auto defaults = std::make_shared<Policy::Compiled>();
      if (!(s = CompilePolicy(doc, lines, nullptr, defaults.get())).ok()) return s;
      p->compiled_ = defaults;
      // One compiled form per org with a section; an org named only in
      // approvals.orgs shares the defaults (its entry is looked up by org)
      // but has its own version.
      const Json* orgs = doc.contains("orgs") && doc["orgs"].is_object() ? &doc["orgs"] : nullptr;
      if (orgs != nullptr) {
        for (const auto& [org, section] : orgs->items()) {
          if (!(s = CheckSection(org, section, lines)).ok()) return s;
        }
      }
      std::set<std::string> named;
      if (orgs != nullptr) {
        for (auto it = orgs->begin(); it != orgs->end(); ++it) named.insert(it.key());
      }
      if (doc.contains("approvals") && doc["approvals"].is_object() && doc["approvals"].contains("orgs") &&
          doc["approvals"]["orgs"].is_object()) {
        const Json& ao = doc["approvals"]["orgs"];
        for (auto it = ao.begin(); it != ao.end(); ++it) named.insert(it.key());
      }
      for (const std::string& org : named) {
        const Json* section = orgs != nullptr && orgs->contains(org) ? &(*orgs)[org] : nullptr;
        Origins origins;
        Json eff = EffectiveDocOf(doc, org, section, &origins);
        Policy::OrgForm form;
        form.version = VersionOf(eff, &s);
        if (!s.ok()) return Status::Error(errc::kPolicyInvalid, s.message());
        if (section != nullptr) {
          auto compiled = std::make_shared<Policy::Compiled>();
          if (!(s = CompilePolicy(eff, lines, &origins, compiled.get())).ok()) {
            return Status::Error(errc::kPolicyInvalid, s.message() + " (in org '" + org + "')");
          }
          form.compiled = std::move(compiled);
        } else {
          form.compiled = defaults;
        }
        p->orgs_.emplace(org, std::move(form));
      }
      // Every other org: the file without `orgs` and without approvals.orgs.
      Json base = doc;
      base.erase("orgs");
      if (base.contains("approvals") && base["approvals"].is_object() && base["approvals"].contains("orgs")) {
        base["approvals"].erase("orgs");
        if (base["approvals"].empty()) base.erase("approvals");
      }
      p->default_version_ = VersionOf(base, &s);
      if (!s.ok()) return Status::Error(errc::kPolicyInvalid, s.message());
    } catch (const std::exception& e) {
      // The schema should make this unreachable; never let a bad file throw.
      return Status::Error(errc::kPolicyInvalid, std::string("policy does not compile: ") + e.what());
    }
    std::string bytes;
    if (!(s = CanonicalBytes(doc, &bytes)).ok()) return Status::Error(errc::kPolicyInvalid, s.message());
    p->doc_ = doc;
    p->source_ = source;
    p->content_hash_ = Sha256Hex(bytes);
    p->version_ = "file:" + p->content_hash_.substr(0, 16);
    *out = std::move(p);
    return Status::Ok();
  }

  // What the schema cannot say about an org's section: `mode: bypass`
  // skips the deny list, and an org cannot lift a deployment deny, so it
  // is refused in a section and in a section's agents.
  static Status CheckSection(const std::string& org, const Json& section, const LineMap* lines) {
    const std::string ptr = "/orgs/" + PointerToken(org);
    auto bypass = [&](const Json& tier, const std::string& at) {
      if (tier.is_object() && tier.contains("mode") && tier["mode"] == "bypass") {
        return Status::Error(
            errc::kPolicyInvalid,
            Where(lines, at + "/mode") + at +
                "/mode: bypass is not allowed in an org section (it would skip the deployment's "
                "deny list, which an org cannot lift); use dangerous, which honours deny");
      }
      return Status::Ok();
    };
    Status s = bypass(section, ptr);
    if (s.ok() && section.is_object() && section.contains("agents") && section["agents"].is_object()) {
      for (const auto& [id, a] : section["agents"].items()) {
        if (!(s = bypass(a, ptr + "/agents/" + PointerToken(id))).ok()) break;
      }
    }
    return s;
  }
};

const std::string& Policy::version(const std::string& org_id) const {
  if (orgs_.empty()) return default_version_;
  auto it = orgs_.find(org_id);
  return it == orgs_.end() ? default_version_ : it->second.version;
}

Json Policy::EffectiveDoc(const std::string& org_id) const {
  const Json* section = nullptr;
  if (doc_.contains("orgs") && doc_["orgs"].is_object() && doc_["orgs"].contains(org_id)) {
    section = &doc_["orgs"][org_id];
  }
  return EffectiveDocOf(doc_, org_id, section, nullptr);
}

std::vector<std::string> Policy::OrgSections() const {
  std::vector<std::string> out;
  if (doc_.contains("orgs") && doc_["orgs"].is_object()) {
    for (auto it = doc_["orgs"].begin(); it != doc_["orgs"].end(); ++it) out.push_back(it.key());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status LoadPolicyJson(const Json& doc, const std::string& source, PolicyPtr* out) {
  return PolicyLoader::Load(doc, source, nullptr, out);
}

Status ParsePolicyYaml(std::string_view text, Json* doc, LineMap* lines) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  YamlBudget budget;
  Status s = YamlToJson(root, "", doc, lines, 0, &budget);
  if (!s.ok()) return s;
  if (doc->is_null()) *doc = Json::object();  // an empty file: every default
  return Status::Ok();
}

Status LoadPolicyDocument(const Json& doc, const std::string& source, const LineMap* lines, PolicyPtr* out) {
  return PolicyLoader::Load(doc, source, lines, out);
}

Status LoadPolicyYaml(std::string_view text, const std::string& source, PolicyPtr* out) {
  Json doc;
  LineMap lines;
  Status s = ParsePolicyYaml(text, &doc, &lines);
  if (!s.ok()) return s;
  return PolicyLoader::Load(doc, source, &lines, out);
}

Status LoadPolicyFile(const std::string& path, PolicyPtr* out) {
  // A directory is a Duragent workspace (decide/duragent_policy.h).
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) return LoadDuragentLayout(path, out);
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error(errc::kPolicyInvalid, "cannot read policy file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  Status s = LoadPolicyYaml(ss.str(), path, out);
  if (!s.ok()) return Status::Error(s.code(), path + ": " + s.message());
  return s;
}

}  // namespace tollgate
