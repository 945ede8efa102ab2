// An org's effective policy document (docs/policy.md, "Organisations"):
// the file without `orgs`, the org's section merged over it, and of
// `approvals.orgs` the org's own entry alone. What the org's version hashes
// and its compiled form is compiled from; the merge rules are OrgMerge's
// (org_merge.cpp). Internal to decide; pure.
#pragma once

#include <string>

#include "core/canonical_json.h"
#include "decide/policy_compiler.h"

namespace tollgate {

// `section` is the org's section (null: none). When `origins` is not null
// it receives, for the merged document's pointers, the file pointers they
// came from, so an error names the right line.
Json EffectiveDocOf(const Json& doc, const std::string& org_id, const Json* section, Origins* origins);

}  // namespace tollgate
