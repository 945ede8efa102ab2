// Policy: one policy file, parsed (YAML or JSON), schema-checked and
// compiled (globs precompiled and indexed): the deployment defaults, plus
// one effective policy per org that has a section under `orgs:`
// (docs/policy.md, "Organisations"). Immutable once loaded; share it
// through PolicyPtr. The YAML reference is docs/policy.md; the schema is
// schemas/policy.schema.json.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/canonical_json.h"
#include "core/status.h"
#include "core/tool_catalog.h"

namespace tollgate {

// Error codes of the decide stage (docs/errors.md).
namespace errc {
inline constexpr const char* kBudgetExceeded = "E_BUDGET_EXCEEDED";
inline constexpr const char* kPolicyInvalid = "E_POLICY_INVALID";
inline constexpr const char* kNoPolicy = "E_NO_POLICY";
}  // namespace errc

// DangerLevel: core/tool_catalog.h.
const char* DangerName(DangerLevel d);
bool ParseDanger(std::string_view name, DangerLevel* out);  // "SAFE".."CRITICAL"

enum class Mode : uint8_t { kBypass, kPlan, kAsk, kRestrict, kDangerous };
const char* ModeName(Mode m);
bool ParseMode(std::string_view name, Mode* out);

class Policy;
using PolicyPtr = std::shared_ptr<const Policy>;

// Parses YAML text, converts it to JSON, validates it against
// schemas/policy.schema.json and compiles it. Errors are E_POLICY_INVALID
// with "line N: ..." naming the offending place. `source` (a path) is kept
// for policy.updated.
Status LoadPolicyYaml(std::string_view text, const std::string& source, PolicyPtr* out);
// As above from a file (E_POLICY_INVALID also when it cannot be read). A
// directory is a Duragent workspace, translated into one document
// (decide/duragent_policy.h).
Status LoadPolicyFile(const std::string& path, PolicyPtr* out);
// From the JSON document (the "policy" of a policy.updated event).
Status LoadPolicyJson(const Json& doc, const std::string& source, PolicyPtr* out);

// One thing wrong with a policy file (`tollgate policy check`, a refused
// live edit): where it is, 1-based (0 when not known: a Duragent
// workspace's messages name their file and line themselves), and what.
struct PolicyProblem {
  int line = 0;
  int column = 0;
  std::string message;
};
// Every problem of a policy, in file order, where the loaders above stop
// at the first: YAML syntax (nothing more can be read after it), every
// duplicate key, every schema violation of each top-level key and of each
// entry of a failing one (unknown keys at their key), then the compiler's
// errors of each top-level key, list item and tool on its own, and each
// org section's. Empty, with *out set, exactly when LoadPolicyYaml would
// load it (that is tried first, so a valid file costs one load).
std::vector<PolicyProblem> CheckPolicyYaml(std::string_view text, const std::string& source, PolicyPtr* out);
// As above for a file (a directory: LoadPolicyFile's one error).
std::vector<PolicyProblem> CheckPolicyFile(const std::string& path, PolicyPtr* out);

class Policy {
 public:
  // The document as JSON (YAML converted), what policy.updated records.
  const Json& doc() const { return doc_; }
  const std::string& source() const { return source_; }
  // SHA-256 hex of the canonical JSON of doc() (the whole file, every org).
  const std::string& content_hash() const { return content_hash_; }
  // The deployment-wide version: "file:" + the first 16 hex digits of
  // content_hash(). Changes with any edit of the file, so it is for logs,
  // policy.updated and labels (a what-if's candidate), never for a
  // decision: decisions carry version(org_id).
  const std::string& version() const { return version_; }
  // The version of org `org_id`'s effective policy: "file:" + the first 16
  // hex digits of the SHA-256 of the canonical JSON of EffectiveDoc(org_id).
  // Another org's section (or its approvals.orgs entry) is not part of that
  // document, so editing it never changes this. For a file with neither
  // `orgs:` nor `approvals.orgs` it equals version().
  const std::string& version(const std::string& org_id) const;
  // Org `org_id`'s effective document: the file without `orgs`, its own
  // section merged over it (docs/policy.md, "Organisations"), and of
  // `approvals.orgs` its own entry alone. What version(org_id) hashes and
  // compiled(org_id) is compiled from.
  Json EffectiveDoc(const std::string& org_id) const;
  // The org ids with a section under `orgs:`, sorted.
  std::vector<std::string> OrgSections() const;

  struct Compiled;  // the precompiled form (decide/compiled_policy.h)
  // The deployment defaults: what an org without a section decides under.
  const Compiled& compiled() const { return *compiled_; }
  // What a request of org `org_id` is decided under (its own compiled
  // form when it has a section, else the defaults). One hash lookup, and
  // none when the file has no org sections.
  const Compiled& compiled(const std::string& org_id) const {
    if (orgs_.empty()) return *compiled_;
    auto it = orgs_.find(org_id);
    return it == orgs_.end() ? *compiled_ : *it->second.compiled;
  }

  Policy();
  ~Policy();

 private:
  friend struct PolicyLoader;
  friend class PolicyInForce;  // reads every org's version
  struct OrgForm {
    std::shared_ptr<const Compiled> compiled;
    std::string version;
  };
  Json doc_;
  std::string source_;
  std::string content_hash_;
  std::string version_;
  std::string default_version_;  // version(org) of an org with no section and no approvals.orgs entry
  std::shared_ptr<const Compiled> compiled_;
  // Orgs with a section or an approvals.orgs entry.
  std::unordered_map<std::string, OrgForm> orgs_;
};

}  // namespace tollgate
