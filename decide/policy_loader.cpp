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
#include "decide/policy_problems.h"

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
// Problems (decide/policy_problems.h).

bool Problems::Add(Found f) {
  if (found.size() >= kMax) return false;
  if (!Has(f.ptr, f.what) || f.ptr.empty()) found.push_back(std::move(f));
  return all;
}

bool Problems::Has(const std::string& ptr, const std::string& what) const {
  return std::any_of(found.begin(), found.end(),
                     [&](const Found& g) { return g.ptr == ptr && g.what == what; });
}

SourceMark Problems::Place(const Found& f) const {
  if (f.ptr.empty() && f.mark.line > 0) return f.mark;
  SourceMark m = MarkOf(lines, f.ptr);
  // An unknown field is placed at its key (when the map knows the field
  // itself, not only an ancestor).
  if (f.at_key && lines != nullptr && lines->count(f.ptr) != 0 && m.key_line > 0) {
    return {m.key_line, m.key_column, m.key_line, m.key_column};
  }
  return m;
}

Status Problems::First() const {
  const Found& f = found.front();
  const SourceMark m = Place(f);
  const std::string where = m.line > 0      ? "line " + std::to_string(m.line) + ": "
                            : f.ptr.empty() ? ""
                                            : "at " + f.ptr + ": ";
  return Status::Error(errc::kPolicyInvalid, where + f.what);
}

Found SchemaFound(const std::string& message) {
  Found f;
  f.what = message;
  std::string rest = message;
  if (!message.empty() && message[0] == '/') {
    const size_t colon = message.find(": ");
    if (colon != std::string::npos) {
      f.ptr = message.substr(0, colon);
      rest = message.substr(colon + 2);
    }
  }
  constexpr std::string_view kUnknown = "unknown field '";
  if (rest.starts_with(kUnknown) && rest.size() > kUnknown.size() && rest.back() == '\'') {
    f.ptr += "/" + PointerToken(rest.substr(kUnknown.size(), rest.size() - kUnknown.size() - 1));
    f.at_key = true;
  }
  return f;
}

Found CompileFound(const Status& s, const std::string& at, const LineMap* lines, const std::string& suffix) {
  Found f;
  f.ptr = at;
  f.what = s.message();
  if (const std::string where = Where(lines, at); f.what.starts_with(where)) f.what.erase(0, where.size());
  f.what += suffix;
  return f;
}

// ---------------------------------------------------------------------------
// YAML -> JSON, remembering where every JSON pointer is.
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

SourceMark MarkAt(const YAML::Mark& m) { return {m.line + 1, m.column + 1, 0, 0}; }

struct YamlReader {
  LineMap* lines;
  Problems* pr;
  size_t values = 0;
  size_t bytes = 0;

  // A problem nothing more can be read after (depth, a bomb): false.
  bool Fatal(const YAML::Node& n, std::string what) {
    pr->Add({"", std::move(what), false, MarkAt(n.Mark())});
    return false;
  }

  // False when nothing more can be read: a fatal problem, or (not
  // collecting) any problem. A duplicate or non-scalar key is recorded and
  // its entry skipped.
  bool Read(const YAML::Node& n, const std::string& ptr, Json* out, int depth, const YAML::Node* key) {
    if (depth > 64) return Fatal(n, "nested too deeply");
    if (++values > kMaxPolicyValues) {
      return Fatal(n, "more than " + std::to_string(kMaxPolicyValues) + " values (aliases expanding?)");
    }
    bytes += ptr.size() + 16 + (n.IsScalar() ? n.Scalar().size() : 0);
    if (bytes > kMaxPolicyExpandedBytes) {
      return Fatal(n, "the policy expands to more than " + std::to_string(kMaxPolicyExpandedBytes) +
                          " bytes (aliases expanding?)");
    }
    SourceMark m = MarkAt(n.Mark());
    if (key != nullptr) {
      const SourceMark k = MarkAt(key->Mark());
      if (m.line <= 0) m = k;  // an empty value has no mark of its own
      m.key_line = k.line;
      m.key_column = k.column;
    }
    (*lines)[ptr] = m;
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        *out = nullptr;
        return true;
      case YAML::NodeType::Scalar:
        *out = YamlScalar(n);
        return true;
      case YAML::NodeType::Sequence: {
        *out = Json::array();
        size_t i = 0;
        for (const auto& item : n) {
          Json v;
          if (!Read(item, ptr + "/" + std::to_string(i++), &v, depth + 1, nullptr)) return false;
          out->push_back(std::move(v));
        }
        return true;
      }
      case YAML::NodeType::Map:
        return ReadMap(n, ptr, out, depth);
    }
    return true;
  }

  bool ReadMap(const YAML::Node& n, const std::string& ptr, Json* out, int depth) {
    *out = Json::object();
    for (const auto& kv : n) {
      const SourceMark at = MarkAt(kv.first.Mark());
      if (!kv.first.IsScalar()) {
        if (!pr->Add({"", "keys must be plain strings", false, at})) return false;
        continue;
      }
      const std::string key = kv.first.Scalar();
      if (out->contains(key)) {
        if (!pr->Add({"", "duplicate key '" + key + "'", false, at})) return false;
        continue;
      }
      Json v;
      if (!Read(kv.second, ptr + "/" + PointerToken(key), &v, depth + 1, &kv.first)) return false;
      (*out)[key] = std::move(v);
    }
    return true;
  }
};

std::string VersionOf(const Json& doc, Status* s) {
  std::string bytes;
  *s = CanonicalBytes(doc, &bytes);
  return "file:" + Sha256Hex(bytes).substr(0, 16);
}

}  // namespace

bool ReadPolicyYaml(std::string_view text, Json* doc, LineMap* lines, Problems* pr) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    pr->Add({"", e.msg, false, MarkAt(e.mark)});
    return false;
  }
  YamlReader reader{lines, pr};
  if (!reader.Read(root, "", doc, 0, nullptr)) return false;
  if (doc->is_null()) *doc = Json::object();  // an empty file: every default
  return true;
}

struct PolicyLoader {
  // Everything after reading, into `pr`: the document's shape, then its
  // compiled forms and versions. Collecting (pr->all), the compiler runs on
  // each top-level key alone first, then on the file without the keys that
  // failed, so each org section is still compiled.
  static PolicyPtr Load(const Json& doc, const std::string& source, Problems* pr) {
    if (!doc.is_object()) {
      pr->Add({"", "a policy must be a mapping (an object)"});
      return nullptr;
    }
    if (!pr->all) {
      if (!Ids(doc, pr) || !Schema(doc, pr) || !Redact(doc, pr)) return nullptr;
      return Build(doc, source, pr);
    }
    // Collecting: each part the schema accepts is compiled, each on its
    // own, then the file without the parts that failed (policy_check.cpp).
    Ids(doc, pr);
    const std::set<std::string> bad = CollectSchemaProblems(doc, pr);
    if (!bad.count("/redact")) Redact(doc, pr);
    Json clean = doc;
    clean.erase("agents");  // refused above, whatever they hold
    for (const std::string& key : CompileEachKey(doc, bad, pr)) clean.erase(key);
    if (bad.count("/orgs")) clean.erase("orgs");
    if (clean.contains("orgs") && clean["orgs"].is_object()) {
      for (const auto& [org, _] : doc["orgs"].items()) {
        if (bad.count("/orgs/" + PointerToken(org))) clean["orgs"].erase(org);
      }
    }
    PolicyPtr p = Build(clean, source, pr);
    return pr->found.empty() ? p : nullptr;
  }

  // Org ids and no top-level agent entries. False: stop.
  static bool Ids(const Json& doc, Problems* pr) {
    // Org ids first: the schema's message for a bad property name names
    // no place (schemas/policy.schema.json says the same).
    if (doc.contains("orgs") && doc["orgs"].is_object()) {
      for (auto it = doc["orgs"].begin(); it != doc["orgs"].end(); ++it) {
        const std::string& org = it.key();
        const bool control = std::any_of(org.begin(), org.end(), [](char ch) {
          const auto c = static_cast<unsigned char>(ch);
          return c < 0x20 || c == 0x7f;
        });
        if ((org.empty() || control || org.size() > kMaxIdBytes) &&
            !pr->Add({"/orgs/" + PointerToken(org),
                      "/orgs: an org id must be 1 to 256 bytes without control characters"})) {
          return false;
        }
      }
    }
    // An agent id is an org's: a top-level entry would bind that id in
    // every org (another org's `a1` would get these rules and aliases), so
    // it is refused with the spelling that says whose agent it is.
    if (auto a = doc.find("agents"); a != doc.end() && a->is_object()) {
      for (auto it = a->begin(); it != a->end(); ++it) {
        const std::string id = it.key();
        const std::string at = "/agents/" + PointerToken(id);
        if (!pr->Add({at, at + ": an agent entry belongs to one org; a top-level one would apply to agent '" +
                              id + "' of every org. Write it under its org: orgs.<org>.agents." + id +
                              " (docs/policy.md, \"Agents belong to an org\")"})) {
          return false;
        }
      }
    }
    return pr->found.empty();
  }

  static bool Schema(const Json& doc, Problems* pr) {
    if (Status s = SchemaRegistry::Builtin().Validate("policy", doc); !s.ok())
      pr->Add(SchemaFound(s.message()));
    return pr->found.empty();
  }

  // redact.values must compile: the stages apply them to everything logged.
  static bool Redact(const Json& doc, Problems* pr) {
    std::shared_ptr<const Redactor> redactor;
    if (Status s = Redactor::FromPolicy(doc, &redactor); !s.ok()) return pr->Add({"/redact", s.message()});
    return true;
  }

  // The compiled forms and versions; null when anything was found.
  static PolicyPtr Build(const Json& doc, const std::string& source, Problems* pr) {
    auto p = std::make_shared<Policy>();
    try {
      // The deployment defaults (`orgs` is not read by the compiler).
      auto defaults = std::make_shared<Policy::Compiled>();
      std::string at;
      if (Status s = CompilePolicy(doc, pr->lines, nullptr, defaults.get(), &at); !s.ok()) {
        if (!pr->Add(CompileFound(s, at, pr->lines))) return nullptr;
      }
      p->compiled_ = defaults;
      if (!BuildOrgs(doc, defaults, pr, p.get())) return nullptr;
      // Every other org: the file without `orgs` and without approvals.orgs.
      Json base = doc;
      base.erase("orgs");
      if (base.contains("approvals") && base["approvals"].is_object() && base["approvals"].contains("orgs")) {
        base["approvals"].erase("orgs");
        if (base["approvals"].empty()) base.erase("approvals");
      }
      Status s;
      p->default_version_ = VersionOf(base, &s);
      if (!s.ok()) pr->Add({"", s.message()});
    } catch (const std::exception& e) {
      // The schema should make this unreachable; never let a bad file throw.
      pr->Add({"", std::string("policy does not compile: ") + e.what()});
    }
    if (!pr->found.empty()) return nullptr;
    std::string bytes;
    if (Status s = CanonicalBytes(doc, &bytes); !s.ok()) {
      pr->Add({"", s.message()});
      return nullptr;
    }
    p->doc_ = doc;
    p->source_ = source;
    p->content_hash_ = Sha256Hex(bytes);
    p->version_ = "file:" + p->content_hash_.substr(0, 16);
    return p;
  }

  // One compiled form per org with a section; an org named only in
  // approvals.orgs shares the defaults (its entry is looked up by org) but
  // has its own version. False: stop.
  static bool BuildOrgs(const Json& doc, const std::shared_ptr<const Policy::Compiled>& defaults,
                        Problems* pr, Policy* p) {
    const Json* orgs = doc.contains("orgs") && doc["orgs"].is_object() ? &doc["orgs"] : nullptr;
    std::set<std::string> named;
    if (orgs != nullptr) {
      for (const auto& [org, section] : orgs->items()) {
        if (!CheckSection(org, section, pr)) return false;
        named.insert(org);
      }
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
      Status s;
      form.version = VersionOf(eff, &s);
      if (!s.ok() && !pr->Add({"", s.message()})) return false;
      form.compiled = defaults;
      if (section != nullptr) {
        auto compiled = std::make_shared<Policy::Compiled>();
        std::string at;
        if (!(s = CompilePolicy(eff, pr->lines, &origins, compiled.get(), &at)).ok()) {
          const Found whole = CompileFound(s, at, pr->lines, " (in org '" + org + "')");
          // The deployment's own error again (every org merges it): said once.
          if (pr->Has(at, CompileFound(s, at, pr->lines).what)) continue;
          if (!pr->all) return pr->Add(whole);
          CompileSectionKeys(doc, org, whole, pr);
          continue;
        }
        form.compiled = std::move(compiled);
      }
      p->orgs_.emplace(org, std::move(form));
    }
    return true;
  }

  // What the schema cannot say about an org's section: `mode: bypass`
  // skips the deny list, and an org cannot lift a deployment deny, so it
  // is refused in a section and in a section's agents. False: stop.
  static bool CheckSection(const std::string& org, const Json& section, Problems* pr) {
    const std::string ptr = "/orgs/" + PointerToken(org);
    auto bypass = [&](const Json& tier, const std::string& at) {
      if (tier.is_object() && tier.contains("mode") && tier["mode"] == "bypass") {
        return pr->Add({at + "/mode", at +
                                          "/mode: bypass is not allowed in an org section (it would skip the "
                                          "deployment's deny list, which an org cannot lift); use dangerous, "
                                          "which honours deny"});
      }
      return true;
    };
    if (!bypass(section, ptr)) return false;
    if (section.is_object() && section.contains("agents") && section["agents"].is_object()) {
      for (const auto& [id, a] : section["agents"].items()) {
        if (!bypass(a, ptr + "/agents/" + PointerToken(id))) return false;
      }
    }
    return true;
  }
};

PolicyPtr LoadInto(const Json& doc, const std::string& source, Problems* pr) {
  return PolicyLoader::Load(doc, source, pr);
}

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

namespace {
Status Loaded(const Problems& pr, PolicyPtr p, PolicyPtr* out) {
  if (!pr.found.empty()) return pr.First();
  *out = std::move(p);
  return Status::Ok();
}
}  // namespace

Status LoadPolicyJson(const Json& doc, const std::string& source, PolicyPtr* out) {
  Problems pr;
  PolicyPtr p = LoadInto(doc, source, &pr);
  return Loaded(pr, std::move(p), out);
}

Status ParsePolicyYaml(std::string_view text, Json* doc, LineMap* lines) {
  Problems pr{lines};
  ReadPolicyYaml(text, doc, lines, &pr);
  return pr.found.empty() ? Status::Ok() : pr.First();
}

Status LoadPolicyDocument(const Json& doc, const std::string& source, const LineMap* lines, PolicyPtr* out) {
  Problems pr{lines};
  PolicyPtr p = LoadInto(doc, source, &pr);
  return Loaded(pr, std::move(p), out);
}

Status LoadPolicyYaml(std::string_view text, const std::string& source, PolicyPtr* out) {
  Json doc;
  LineMap lines;
  Problems pr{&lines};
  PolicyPtr p = ReadPolicyYaml(text, &doc, &lines, &pr) ? LoadInto(doc, source, &pr) : nullptr;
  return Loaded(pr, std::move(p), out);
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
