// What is wrong with a policy file, and where: the loader stops at the
// first problem (its Status), `tollgate policy check` collects them all
// (decide/policy_loader.h, CheckPolicyYaml). Internal to decide; pure.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/canonical_json.h"
#include "core/status.h"
#include "decide/policy_compiler.h"

namespace tollgate {

// One problem before it is placed: the pointer in the file it is about
// (placed by the LineMap; at the key's mark when `at_key`, as for an
// unknown field), or, with no pointer, an explicit mark (YAML syntax).
struct Found {
  std::string ptr;
  std::string what;  // the words, without "line N: "
  bool at_key = false;
  SourceMark mark;
};

struct Problems {
  // More are not recorded: a file this broken needs the first ones fixed.
  static constexpr size_t kMax = 100;
  const LineMap* lines = nullptr;
  bool all = false;  // collect every problem; false: stop at the first
  std::vector<Found> found;

  // Records `f` (once; not past kMax); whether to go on looking.
  bool Add(Found f);
  bool Has(const std::string& ptr, const std::string& what) const;
  SourceMark Place(const Found& f) const;
  // The first problem as the loader's Status: E_POLICY_INVALID, "line N: ...".
  Status First() const;
};

// A schema message ("/approvals: unknown field 'x'") as a Found: an
// unknown field is placed at its own key.
Found SchemaFound(const std::string& message);
// A compiler error (`s` from CompilePolicy, `at` its *failed_at) as a
// Found, the compiler's "line N: " taken off; `suffix` appended.
Found CompileFound(const Status& s, const std::string& at, const LineMap* lines,
                   const std::string& suffix = "");

// The loader's steps (policy_loader.cpp), each recording into `pr`:
// reading YAML (false when nothing more can be read), and everything
// after (null when anything was found).
bool ReadPolicyYaml(std::string_view text, Json* doc, LineMap* lines, Problems* pr);
PolicyPtr LoadInto(const Json& doc, const std::string& source, Problems* pr);

// What collecting every problem adds (policy_check.cpp): the schema's
// violations of each top-level key and of each entry of a failing one
// (returns the pointers of the parts that failed: "/key", or "/key/entry"
// when the key's entries say where); the compiler's errors of each
// top-level key the schema accepted (each item of a list, each tool) on
// its own. CompileEachKey returns the top-level keys that failed either.
std::set<std::string> CollectSchemaProblems(const Json& doc, Problems* pr);
std::vector<std::string> CompileEachKey(const Json& doc, const std::set<std::string>& bad, Problems* pr);
// An org section's keys compiled one at a time over `clean` (the file
// without the top-level keys that failed), after the whole section failed
// with `whole`: each key's first error, else `whole`.
void CompileSectionKeys(const Json& clean, const std::string& org, const Found& whole, Problems* pr);

}  // namespace tollgate
