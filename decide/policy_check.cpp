// Every problem of a policy at once (decide/policy_loader.h,
// CheckPolicyYaml). The schema and the compiler stop at their first
// error, so each is run again on parts of the file: a top-level key on its
// own, and an entry of a failing key on its own (one list item, one tool,
// one key of an org's section). The parts are independent: the schema
// relates no two top-level keys or entries (schemas/policy.schema.json),
// and the compiler reads each key alone but for apiVersion and execute
// (given to every part) and approver groups (approvals is never split).
// A problem is kept only when it lies inside its part, and whatever this
// finds, a file is refused exactly when LoadPolicyYaml refuses it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "core/schema.h"
#include "decide/compiled_policy.h"
#include "decide/duragent_policy.h"
#include "decide/org_merge.h"
#include "decide/policy_loader.h"
#include "decide/policy_problems.h"

namespace tollgate {
namespace {

// A key with more entries is checked as one part: a bound on the work a
// refused file costs (decide's Tick checks a refused live edit).
constexpr size_t kMaxEntriesSplit = 1000;

bool Within(const std::string& ptr, const std::string& at) {
  return ptr == at || (ptr.size() > at.size() && ptr.starts_with(at) && ptr[at.size()] == '/');
}

// `message` about the part's `local` pointer, about `entry` of the file.
std::string Renamed(const std::string& message, const std::string& local, const std::string& entry) {
  if (!message.starts_with(local)) return message;
  const char next = message.size() > local.size() ? message[local.size()] : ':';
  return next == '/' || next == ':' ? entry + message.substr(local.size()) : message;
}

Status Validate(const Json& doc) { return SchemaRegistry::Builtin().Validate("policy", doc); }

// The schema on each entry of top-level `key` alone; the pointers of the
// entries with a problem of their own.
std::set<std::string> SchemaEntries(const std::string& key, const Json& value, Problems* pr) {
  std::set<std::string> bad;
  if (!(value.is_array() || value.is_object()) || value.size() > kMaxEntriesSplit) return bad;
  const std::string at = "/" + PointerToken(key);
  size_t i = 0;
  for (auto it = value.begin(); it != value.end(); ++it, ++i) {
    Json unit = Json::object();
    std::string entry, local;  // the entry's pointer in the file, in the part
    if (value.is_array()) {
      unit[key] = Json::array({*it});
      entry = at + "/" + std::to_string(i);
      local = at + "/0";
    } else {
      unit[key] = Json::object();
      unit[key][it.key()] = *it;
      entry = local = at + "/" + PointerToken(it.key());
    }
    const Status s = Validate(unit);
    if (s.ok()) continue;
    Found f = SchemaFound(Renamed(s.message(), local, entry));
    if (Within(f.ptr, entry)) {
      pr->Add(std::move(f));
      bad.insert(entry);
    }
  }
  return bad;
}

// CompilePolicy that never throws (the schema should make it unreachable).
Status Compile(const Json& doc, const Problems* pr, const Origins* origins, std::string* at) {
  Policy::Compiled unused;
  try {
    return CompilePolicy(doc, pr->lines, origins, &unused, at);
  } catch (const std::exception& e) {
    at->clear();
    return Status::Error(errc::kPolicyInvalid, std::string("policy does not compile: ") + e.what());
  }
}

// Whether the compiler can take top-level `key`'s entries one at a time:
// a list's items, `tools`' tools (no entry refers to another).
bool Splits(const std::string& key, const Json& value) {
  return (value.is_array() || (key == "tools" && value.is_object())) && value.size() <= kMaxEntriesSplit;
}

// The compiler on each item of a list (or tool of `tools`) alone but those
// in `skip` (the schema refused them); whether any had an error.
bool CompileEntries(const Json& context, const std::string& key, const Json& value,
                    const std::set<std::string>& skip, Problems* pr) {
  const bool list = value.is_array();
  bool any = false;
  size_t i = 0;
  for (auto it = value.begin(); it != value.end(); ++it, ++i) {
    const std::string entry =
        "/" + PointerToken(key) + "/" + (list ? std::to_string(i) : PointerToken(it.key()));
    if (skip.count(entry)) continue;
    Json unit = context;
    Origins origins;  // the part's item 0 is the file's item i
    if (list) {
      unit[key] = Json::array({*it});
      origins["/" + PointerToken(key) + "/0"] = "/" + PointerToken(key) + "/" + std::to_string(i);
    } else {
      unit[key] = Json::object();
      unit[key][it.key()] = *it;
    }
    std::string at;
    if (Status s = Compile(unit, pr, list ? &origins : nullptr, &at); !s.ok()) {
      pr->Add(CompileFound(s, at, pr->lines));
      any = true;
    }
  }
  return any;
}

std::vector<PolicyProblem> Placed(const Problems& pr) {
  std::vector<PolicyProblem> out;
  for (const Found& f : pr.found) {
    const SourceMark m = pr.Place(f);
    PolicyProblem p{m.line, m.column, f.what};
    if (m.line <= 0 && !f.ptr.empty()) p.message = "at " + f.ptr + ": " + f.what;
    out.push_back(std::move(p));
  }
  // File order; the unplaced last.
  std::stable_sort(out.begin(), out.end(), [](const PolicyProblem& a, const PolicyProblem& b) {
    return std::make_tuple(a.line <= 0, a.line, a.column) < std::make_tuple(b.line <= 0, b.line, b.column);
  });
  return out;
}

}  // namespace

std::set<std::string> CollectSchemaProblems(const Json& doc, Problems* pr) {
  std::set<std::string> bad;
  const Status whole = Validate(doc);
  if (whole.ok()) return bad;
  for (const auto& [key, value] : doc.items()) {
    Json unit = Json::object();
    unit[key] = value;
    const Status s = Validate(unit);
    if (s.ok()) continue;
    std::set<std::string> entries = SchemaEntries(key, value, pr);
    if (entries.empty()) {
      pr->Add(SchemaFound(s.message()));
      entries.insert("/" + PointerToken(key));
    }
    bad.merge(entries);
  }
  if (bad.empty()) {
    // Only the whole file fails: nothing of it is compiled.
    pr->Add(SchemaFound(whole.message()));
    for (const auto& [key, _] : doc.items()) bad.insert("/" + PointerToken(key));
  }
  return bad;
}

std::vector<std::string> CompileEachKey(const Json& doc, const std::set<std::string>& bad, Problems* pr) {
  // What every part is compiled with: the keys that change how others read.
  Json context = Json::object();
  for (const char* k : {"apiVersion", "execute"}) {
    if (doc.contains(k)) context[k] = doc[k];
  }
  std::vector<std::string> failed;
  for (const auto& [key, value] : doc.items()) {
    if (key == "orgs" || key == "agents") continue;  // compiled per org, over the rest; refused
    const std::string at_key = "/" + PointerToken(key);
    if (bad.count(at_key)) {
      failed.push_back(key);
      continue;
    }
    const auto first_bad = bad.lower_bound(at_key + "/");
    const bool bad_entries = first_bad != bad.end() && first_bad->starts_with(at_key + "/");
    if (bad_entries) {
      // The schema refused some entries: the others, one at a time.
      failed.push_back(key);
      if (Splits(key, value)) CompileEntries(context, key, value, bad, pr);
      continue;
    }
    Json unit = context;
    unit[key] = value;
    std::string at;
    const Status s = Compile(unit, pr, nullptr, &at);
    if (s.ok()) continue;
    failed.push_back(key);
    if (!Splits(key, value) || value.size() < 2 || !CompileEntries(context, key, value, {}, pr)) {
      pr->Add(CompileFound(s, at, pr->lines));
    }
  }
  return failed;
}

void CompileSectionKeys(const Json& clean, const std::string& org, const Found& whole, Problems* pr) {
  const Json& section = clean["orgs"][org];
  bool any = false;
  if (section.is_object() && section.size() <= kMaxEntriesSplit) {
    for (const auto& [key, value] : section.items()) {
      Json doc = clean;
      doc["orgs"][org] = Json::object();
      doc["orgs"][org][key] = value;
      Origins origins;
      const Json eff = EffectiveDocOf(doc, org, &doc["orgs"][org], &origins);
      std::string at;
      if (Status s = Compile(eff, pr, &origins, &at); !s.ok()) {
        pr->Add(CompileFound(s, at, pr->lines, " (in org '" + org + "')"));
        any = true;
      }
    }
  }
  if (!any) pr->Add(whole);
}

std::vector<PolicyProblem> CheckPolicyYaml(std::string_view text, const std::string& source, PolicyPtr* out) {
  // The loader first: a valid file costs one load, and a refused one is
  // refused here too.
  LineMap first_lines;
  Problems first{&first_lines};
  {
    Json doc;
    PolicyPtr p = ReadPolicyYaml(text, &doc, &first_lines, &first) ? LoadInto(doc, source, &first) : nullptr;
    if (first.found.empty()) {
      *out = std::move(p);
      return {};
    }
  }
  Json doc;
  LineMap lines;
  Problems all{&lines, true};
  if (ReadPolicyYaml(text, &doc, &lines, &all)) LoadInto(doc, source, &all);
  return Placed(all.found.empty() ? first : all);
}

std::vector<PolicyProblem> CheckPolicyFile(const std::string& path, PolicyPtr* out) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    Status s = LoadDuragentLayout(path, out);
    if (s.ok()) return {};
    return {PolicyProblem{0, 0, s.message()}};
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return {PolicyProblem{0, 0, "cannot read policy file '" + path + "'"}};
  std::stringstream ss;
  ss << f.rdbuf();
  return CheckPolicyYaml(ss.str(), path, out);
}

}  // namespace tollgate
