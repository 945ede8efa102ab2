// Merging an org's section over the deployment's policy (decide/org_merge.h).
#include "decide/org_merge.h"

#include <algorithm>
#include <cstddef>

namespace tollgate {
namespace {

struct OrgMerge {
  Origins* origins;  // null: not recorded

  void Map(const std::string& merged, const std::string& from) {
    if (origins != nullptr) (*origins)[merged] = from;
  }
  static std::string Child(const std::string& ptr, const std::string& key) {
    return ptr + "/" + PointerToken(key);
  }
  static std::string Child(const std::string& ptr, size_t i) { return ptr + "/" + std::to_string(i); }

  // `out` (the deployment's values, at the same pointers in the file) keeps
  // the keys `over` lacks; the rest come from `over` (at `op` in the file).
  void KeepOthers(const Json& out, const std::string& mp, const Json& over) {
    for (auto it = out.begin(); it != out.end(); ++it) {
      if (!over.contains(it.key())) Map(Child(mp, it.key()), Child(mp, it.key()));
    }
  }

  // Maps merge key by key, recursively; any other value of `over` replaces.
  void Object(Json& out, const std::string& mp, const Json& over, const std::string& op) {
    Map(mp, op);
    KeepOthers(out, mp, over);
    for (const auto& [k, v] : over.items()) {
      auto cur = out.find(k);
      if (cur != out.end() && cur->is_object() && v.is_object()) {
        Object(*cur, Child(mp, k), v, Child(op, k));
      } else {
        out[k] = v;
        Map(Child(mp, k), Child(op, k));
      }
    }
  }

  // `deny`: the union, the deployment's patterns first.
  void Deny(Json& cur, const std::string& kp, const Json& v, const std::string& ko) {
    Map(kp, kp);
    const size_t n = cur.size();
    for (size_t j = 0; j < v.size(); ++j) {
      if (std::find(cur.begin(), cur.begin() + static_cast<std::ptrdiff_t>(n), v[j]) !=
          cur.begin() + static_cast<std::ptrdiff_t>(n)) {
        continue;  // denied already
      }
      Map(Child(kp, cur.size()), Child(ko, j));
      cur.push_back(v[j]);
    }
  }

  // `rules`: the deployment's deny rules, then the section's rules; each
  // unnamed rule keeps the name it has in its own file.
  void Rules(Json& cur, const std::string& kp, const Json& v, const std::string& ko) {
    Json merged = Json::array();
    for (size_t i = 0; i < cur.size(); ++i) {
      const Json& r = cur[i];
      if (!r.is_object() || r.value("verdict", "") != "deny") continue;
      Json kept = r;
      if (!kept.contains("name")) kept["name"] = "rule-" + std::to_string(i);  // its name in the deployment
      Map(Child(kp, merged.size()), Child(kp, i));
      merged.push_back(std::move(kept));
    }
    for (size_t j = 0; j < v.size(); ++j) {
      Json r = v[j];
      if (r.is_object() && !r.contains("name"))
        r["name"] = "rule-" + std::to_string(j);  // its name in the section
      Map(Child(kp, merged.size()), Child(ko, j));
      merged.push_back(std::move(r));
    }
    Map(kp, ko);
    cur = std::move(merged);
  }

  // `budgets`: by name, the section's replacing the deployment's in place,
  // its new ones after.
  void Budgets(Json& cur, const std::string& kp, const Json& v, const std::string& ko) {
    Json merged = Json::array();
    std::vector<bool> used(v.size(), false);
    for (size_t i = 0; i < cur.size(); ++i) {
      const Json& b = cur[i];
      const std::string name = b.is_object() ? b.value("name", "") : "";
      size_t j = 0;
      while (j < v.size() && (used[j] || !v[j].is_object() || v[j].value("name", "") != name)) ++j;
      if (j < v.size()) {
        used[j] = true;
        Map(Child(kp, merged.size()), Child(ko, j));
        merged.push_back(v[j]);
      } else {
        Map(Child(kp, merged.size()), Child(kp, i));
        merged.push_back(b);
      }
    }
    for (size_t j = 0; j < v.size(); ++j) {
      if (used[j]) continue;
      Map(Child(kp, merged.size()), Child(ko, j));
      merged.push_back(v[j]);
    }
    Map(kp, ko);
    cur = std::move(merged);
  }

  // A tier: the top level (`top`) or one agent's entry. Over the
  // deployment's: `deny` is the union (the deployment's first), the
  // deployment's deny rules stay ahead of the org's `rules`, `budgets` merge
  // by name, `agents` entry by entry (each a tier), other maps key by key;
  // any other value (mode, allow, notify, tool grants, lists) replaces.
  void Tier(Json& out, const std::string& mp, const Json& over, const std::string& op, bool top) {
    if (!top) {
      Map(mp, op);
      KeepOthers(out, mp, over);
    }
    for (const auto& [k, v] : over.items()) {
      const std::string kp = Child(mp, k), ko = Child(op, k);
      auto cur = out.find(k);
      const bool has = cur != out.end();
      if (k == "deny" && has && cur->is_array() && v.is_array()) {
        Deny(*cur, kp, v, ko);
      } else if (k == "rules" && has && cur->is_array() && v.is_array()) {
        Rules(*cur, kp, v, ko);
      } else if (k == "budgets" && has && cur->is_array() && v.is_array()) {
        Budgets(*cur, kp, v, ko);
      } else if (top && k == "agents" && has && cur->is_object() && v.is_object()) {
        for (const auto& [id, entry] : v.items()) {
          auto a = cur->find(id);
          if (a != cur->end() && a->is_object() && entry.is_object()) {
            Tier(*a, Child(kp, id), entry, Child(ko, id), false);
          } else {
            (*cur)[id] = entry;
            Map(Child(kp, id), Child(ko, id));
          }
        }
      } else if (has && cur->is_object() && v.is_object()) {
        Object(*cur, kp, v, ko);
      } else {
        out[k] = v;
        Map(kp, ko);
      }
    }
  }
};

// Of `approvals.orgs`, org `org_id`'s entry alone (an `approvals` left
// empty by that goes too): another org's approvers are not part of this
// org's policy, so editing them does not change its version.
void KeepOwnApprovals(Json* doc, const std::string& org_id) {
  auto ap = doc->find("approvals");
  if (ap == doc->end() || !ap->is_object()) return;
  auto orgs = ap->find("orgs");
  if (orgs == ap->end()) return;
  if (orgs->is_object() && orgs->contains(org_id)) {
    Json own = Json::object();
    own[org_id] = std::move((*orgs)[org_id]);
    *orgs = std::move(own);
    return;
  }
  ap->erase(orgs);
  if (ap->empty()) doc->erase(ap);
}

}  // namespace

Json EffectiveDocOf(const Json& doc, const std::string& org_id, const Json* section, Origins* origins) {
  Json out = doc;
  out.erase("orgs");
  if (section != nullptr && section->is_object()) {
    OrgMerge m{origins};
    m.Tier(out, "", *section, "/orgs/" + PointerToken(org_id), true);
  }
  KeepOwnApprovals(&out, org_id);
  return out;
}

}  // namespace tollgate
