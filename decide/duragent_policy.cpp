// The Duragent workspace layout translated into one policy document
// (decide/duragent_policy.h; docs/policy.md, "Duragent policy files").
#include "decide/duragent_policy.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/sha256.h"
#include "core/tool_catalog.h"
#include "decide/policy_compiler.h"

namespace tollgate {
namespace fs = std::filesystem;
namespace {

constexpr const char* kWorkspaceFile = ".duragent/policy.yaml";

// A tier file as read: its document, its lines, whether it exists.
struct TierFile {
  std::string path;  // absolute
  bool present = false;
  Json doc = Json::object();
  LineMap lines;
};

Status Bad(const std::string& path, const LineMap* lines, const std::string& ptr, const std::string& what) {
  return Status::Error(errc::kPolicyInvalid, path + ": " + Where(lines, ptr) + what);
}

bool PlainName(const std::string& n) {
  if (n.empty() || n == "." || n == ".." || n.size() > 256) return false;
  return std::none_of(n.begin(), n.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f || c == '/';
  });
}

// Reads `path` when it exists; records its hash under `rel` in `files`.
Status ReadTier(const std::string& root, const std::string& rel, Json* files, TierFile* t) {
  t->path = root + "/" + rel;
  std::error_code ec;
  if (!fs::exists(t->path, ec)) return Status::Ok();
  if (!fs::is_regular_file(t->path, ec)) return Bad(t->path, nullptr, "", "not a regular file");
  if (fs::file_size(t->path, ec) > kDuragentMaxFileBytes) {
    return Bad(t->path, nullptr, "", "larger than " + std::to_string(kDuragentMaxFileBytes) + " bytes");
  }
  std::ifstream f(t->path, std::ios::binary);
  if (!f) return Bad(t->path, nullptr, "", "cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  // An empty file is a write in progress (an editor truncates first); read
  // as "no rules" it would drop this tier's denies.
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Bad(t->path, nullptr, "", "the file is empty (a write in progress?); delete it to drop the tier");
  }
  (*files)[rel] = Sha256Hex(text);
  Status s = ParsePolicyYaml(text, &t->doc, &t->lines);
  if (!s.ok()) return Status::Error(errc::kPolicyInvalid, t->path + ": " + s.message());
  if (!t->doc.is_object()) return Bad(t->path, &t->lines, "", "a policy file must be a mapping");
  t->present = true;
  return Status::Ok();
}

// The keys an agent's policy.yaml / policy.local.yaml may hold.
const std::set<std::string>& AgentKeys() {
  static const std::set<std::string> k{"apiVersion", "kind",  "description",  "mode",    "deny", "allow",
                                       "notify",     "rules", "http_request", "budgets", "tools"};
  return k;
}

// Validates one tier file as a policy of its own (schema, globs, rules),
// so every error carries this file's line.
Status CheckTier(const TierFile& t, bool workspace) {
  Json doc = t.doc;
  for (const auto& [k, v] : t.doc.items()) {
    const bool ok = workspace ? k != "orgs" && k != "layout" && k != "agents" : AgentKeys().count(k) > 0;
    if (!ok && !(workspace && k == "org")) {
      return Bad(
          t.path, &t.lines, "/" + PointerToken(k),
          "key '" + k + "' is not allowed in " +
              (workspace ? std::string("the workspace policy (the layout writes orgs and agents itself)")
                         : std::string("an agent's policy file (mode, deny, allow, notify, rules, "
                                       "http_request, budgets, tools)")));
    }
  }
  if (!workspace && t.doc.value("mode", "") == "bypass") {
    return Bad(t.path, &t.lines, "/mode",
               "mode bypass is not allowed for an agent (it would skip the deny list)");
  }
  if (workspace && t.doc.contains("org")) {
    const Json& o = t.doc["org"];
    if (!o.is_string() || !PlainName(o.get<std::string>())) {
      return Bad(t.path, &t.lines, "/org",
                 "org must be an org id: 1 to 256 bytes, no control characters, no '/'");
    }
    doc.erase("org");
  }
  if (!workspace) doc.erase("tools");  // grants here, a registry at the top level
  if (!workspace && t.doc.contains("tools") && !t.doc["tools"].is_array()) {
    return Bad(t.path, &t.lines, "/tools", "tools must be a list of tool names (the agent's grants)");
  }
  PolicyPtr unused;
  Status s = LoadPolicyDocument(doc, t.path, &t.lines, &unused);
  if (!s.ok()) return Status::Error(errc::kPolicyInvalid, t.path + ": " + s.message());
  return Status::Ok();
}

void AddUnique(Json* list, const Json& from) {
  if (!from.is_array()) return;
  for (const auto& v : from) {
    if (std::find(list->begin(), list->end(), v) == list->end()) list->push_back(v);
  }
}

// Duragent's notify union: patterns and deliveries of every enabled tier.
// Lists stay a list; any object form makes the result an object.
Json MergeNotify(const std::vector<const Json*>& tiers) {
  bool object = false, enabled = false;
  Json patterns = Json::array(), deliveries = Json::array();
  for (const Json* n : tiers) {
    if (n == nullptr) continue;
    if (n->is_array()) {
      enabled = true;
      AddUnique(&patterns, *n);
      continue;
    }
    object = true;
    if (!n->value("enabled", true)) continue;
    enabled = true;
    AddUnique(&patterns, n->value("patterns", Json::array()));
    AddUnique(&deliveries, n->value("deliveries", Json::array()));
  }
  if (!object) return patterns;
  Json out{{"enabled", enabled}, {"patterns", patterns}};
  if (!deliveries.empty()) out["deliveries"] = deliveries;
  return out;
}

// `rel` (relative to agents/<agent>/) as an absolute path inside `root`.
Status InsideRoot(const std::string& root, const fs::path& agent_dir, const Json& v, const TierFile& f,
                  const std::string& ptr, std::string* out) {
  if (!v.is_string() || v.get<std::string>().empty()) return Bad(f.path, &f.lines, ptr, "must be a path");
  const fs::path p = fs::path(v.get<std::string>());
  const fs::path abs = (p.is_absolute() ? p : agent_dir / p).lexically_normal();
  const fs::path r = fs::path(root).lexically_normal();
  auto inside = [&r](const fs::path& x) {
    const std::string rs = r.string(), xs = x.string();
    return xs.size() > rs.size() && xs.compare(0, rs.size(), rs) == 0 &&
           (rs.back() == '/' || xs[rs.size()] == '/');
  };
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(abs, ec);
  const fs::path real_root = fs::weakly_canonical(r, ec);
  const bool real_inside = [&] {
    const std::string rs = real_root.string(), xs = real.string();
    return xs.size() > rs.size() && xs.compare(0, rs.size(), rs) == 0 && xs[rs.size()] == '/';
  }();
  if (!inside(abs) || !real_inside) {
    return Bad(f.path, &f.lines, ptr, "'" + v.get<std::string>() + "' leaves the workspace " + root);
  }
  *out = abs.string();
  return Status::Ok();
}

// agent.yaml's spec.tools: the grants and execute's declared_tools entry.
Status ReadAgentYaml(const std::string& root, const fs::path& agent_dir, const TierFile& f, Json* grants,
                     Json* declared) {
  const Json spec = f.doc.value("spec", Json::object());
  if (!spec.is_object() || !spec.contains("tools")) return Status::Ok();
  const Json& tools = spec["tools"];
  if (!tools.is_array()) return Bad(f.path, &f.lines, "/spec/tools", "spec.tools must be a list");
  if (tools.size() > 256) return Bad(f.path, &f.lines, "/spec/tools", "more than 256 tools");
  *grants = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "/spec/tools/" + std::to_string(i);
    const Json& t = tools[i];
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      return Bad(f.path, &f.lines, at, "a tool needs a type and a name");
    }
    const std::string type = t.value("type", ""), name = t["name"].get<std::string>();
    if (type == "builtin") {
      if (FindBuiltinTool(name) == nullptr)
        return Bad(f.path, &f.lines, at + "/name", "no built-in tool '" + name + "'");
      AddUnique(grants, Json::array({name}));
    } else if (type == "cli") {
      const bool ok_name = !name.empty() && name.size() <= 64 &&
                           std::all_of(name.begin(), name.end(),
                                       [](char c) {
                                         return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                                                c == '_' || c == '.';
                                       }) &&
                           name[0] != '.';
      if (!ok_name)
        return Bad(f.path, &f.lines, at + "/name", "a CLI tool name is letters, digits, '-', '_', '.'");
      if (!t.contains("command")) return Bad(f.path, &f.lines, at, "a cli tool needs a command");
      Json entry = Json::object();
      std::string abs;
      Status s = InsideRoot(root, agent_dir, t["command"], f, at + "/command", &abs);
      if (!s.ok()) return s;
      entry["command"] = abs;
      if (t.contains("description")) {
        if (!t["description"].is_string())
          return Bad(f.path, &f.lines, at + "/description", "must be a string");
        entry["description"] = t["description"];
      }
      if (t.contains("readme")) {
        if (!(s = InsideRoot(root, agent_dir, t["readme"], f, at + "/readme", &abs)).ok()) return s;
        entry["readme"] = abs;
      }
      (*declared)[name] = std::move(entry);
    } else {
      return Bad(f.path, &f.lines, at + "/type", "tool type must be builtin or cli");
    }
  }
  AddUnique(grants, Json::array({"cli:*"}));  // declared and discovered CLI tools
  // Memory's tool is registered when memory is configured (the seed).
  if (spec.contains("memory") || f.doc.contains("memory")) AddUnique(grants, Json::array({"memory"}));
  return Status::Ok();
}

// One agent: its two tiers merged, and its agent.yaml's grants.
Status TranslateAgent(const std::string& root, const std::string& name, Json* files, Json* entry,
                      Json* declared) {
  const std::string rel = "agents/" + name + "/";
  TierFile base, local, agent_yaml;
  Status s;
  if (!(s = ReadTier(root, rel + "policy.yaml", files, &base)).ok()) return s;
  if (!(s = ReadTier(root, rel + "policy.local.yaml", files, &local)).ok()) return s;
  if (!(s = ReadTier(root, rel + "agent.yaml", files, &agent_yaml)).ok()) return s;
  for (const TierFile* t : {&base, &local}) {
    if (t->present && !(s = CheckTier(*t, false)).ok()) return s;
  }
  *entry = Json::object();
  for (const TierFile* t : {&base, &local}) {  // local over base, key by key
    for (const auto& [k, v] : t->doc.items()) {
      if (k == "apiVersion" || k == "kind" || k == "deny" || k == "allow" || k == "notify") continue;
      (*entry)[k] = v;
    }
  }
  for (const char* k : {"deny", "allow"}) {
    Json u = Json::array();
    AddUnique(&u, base.doc.value(k, Json::array()));
    AddUnique(&u, local.doc.value(k, Json::array()));
    if (!u.empty()) (*entry)[k] = u;
  }
  const Json* nb = base.doc.contains("notify") ? &base.doc["notify"] : nullptr;
  const Json* nl = local.doc.contains("notify") ? &local.doc["notify"] : nullptr;
  if (nb != nullptr || nl != nullptr) (*entry)["notify"] = MergeNotify({nb, nl});
  if (agent_yaml.present) {
    Json grants, tools = Json::object();
    if (!(s = ReadAgentYaml(root, fs::path(root) / "agents" / name, agent_yaml, &grants, &tools)).ok())
      return s;
    if (!grants.is_null()) {
      if (entry->contains("tools")) {
        const TierFile& t = local.doc.contains("tools") ? local : base;
        return Bad(t.path, &t.lines, "/tools",
                   "the agent's grants come from agent.yaml's spec.tools; drop this list");
      }
      (*entry)["tools"] = grants;
    }
    if (!tools.empty()) (*declared)[name] = tools;
  }
  return Status::Ok();
}

}  // namespace

std::string DuragentLocalPolicyPath(const std::string& dir, const std::string& agent) {
  if (!PlainName(agent)) return "";
  return dir + "/agents/" + agent + "/policy.local.yaml";
}

std::vector<std::string> DuragentLayoutFiles(const std::string& dir) {
  std::vector<std::string> out{dir + "/" + kWorkspaceFile};
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir + "/agents", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.empty() || n[0] == '.' || !PlainName(n) || !it->is_directory(ec)) continue;
    names.push_back(n);
    if (names.size() > kDuragentMaxAgents) break;  // the translation refuses so many
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    for (const char* f : {"policy.yaml", "policy.local.yaml", "agent.yaml"})
      out.push_back(dir + "/agents/" + n + "/" + f);
  }
  return out;
}

Status TranslateDuragentLayout(const std::string& dir_in, Json* out) {
  std::error_code ec;
  const std::string root = fs::absolute(dir_in, ec).lexically_normal().string();
  const std::string dir = root.size() > 1 && root.back() == '/' ? root.substr(0, root.size() - 1) : root;
  Json files = Json::object();
  TierFile ws;
  Status s = ReadTier(dir, kWorkspaceFile, &files, &ws);
  if (!s.ok()) return s;
  if (ws.present && !(s = CheckTier(ws, true)).ok()) return s;

  Json doc = ws.doc;  // the workspace tier is the top level
  const std::string org = doc.value("org", std::string(kDuragentDefaultOrg));
  doc.erase("org");
  if (!doc.contains("apiVersion")) doc["apiVersion"] = "duragent/v1alpha1";
  doc["kind"] = "Policy";

  std::vector<std::string> names;
  for (fs::directory_iterator it(dir + "/agents", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.empty() || n[0] == '.' || !it->is_directory(ec)) continue;
    if (!PlainName(n))
      return Status::Error(errc::kPolicyInvalid, dir + "/agents: '" + n + "' is not an agent id");
    names.push_back(n);
    if (names.size() > kDuragentMaxAgents) {
      return Status::Error(errc::kPolicyInvalid,
                           dir + "/agents: more than " + std::to_string(kDuragentMaxAgents) + " agents");
    }
  }
  std::sort(names.begin(), names.end());
  Json agents = Json::object(), declared = Json::object();
  for (const auto& n : names) {
    Json entry;
    if (!(s = TranslateAgent(dir, n, &files, &entry, &declared)).ok()) return s;
    if (!entry.empty()) agents[n] = std::move(entry);
  }
  if (!agents.empty()) doc["orgs"] = {{org, {{"agents", std::move(agents)}}}};

  Json exec = doc.value("execute", Json::object());
  if (!exec.is_object()) return Bad(ws.path, &ws.lines, "/execute", "execute must be a mapping");
  if (!exec.contains("tools_dir")) exec["tools_dir"] = dir + "/.duragent/tools";
  exec["agents_dir"] = dir + "/agents";
  if (!declared.empty()) exec["declared_tools"] = std::move(declared);
  doc["execute"] = std::move(exec);
  doc["layout"] = {{"kind", "duragent"}, {"root", dir}, {"org", org}, {"files", std::move(files)}};
  *out = std::move(doc);
  return Status::Ok();
}

Status LoadDuragentLayout(const std::string& dir, PolicyPtr* out) {
  Json doc;
  Status s = TranslateDuragentLayout(dir, &doc);
  if (!s.ok()) return s;
  s = LoadPolicyDocument(doc, dir, nullptr, out);
  if (!s.ok()) return Status::Error(s.code(), dir + " (the translated document): " + s.message());
  return s;
}

Status UpdateDuragentLocalPolicy(const std::string& path, const std::vector<std::string>& add,
                                 const std::vector<std::string>& remove, bool* changed) {
  *changed = false;
  YAML::Node root;
  std::error_code ec;
  try {
    if (fs::exists(path, ec)) {
      if (fs::file_size(path, ec) > kDuragentMaxFileBytes)
        return Bad(path, nullptr, "", "too large to update");
      root = YAML::LoadFile(path);
    }
  } catch (const YAML::Exception& e) {
    return Status::Error(errc::kPolicyInvalid,
                         path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root || root.IsNull()) {
    root = YAML::Node(YAML::NodeType::Map);
    root["apiVersion"] = "duragent/v1alpha1";
    root["kind"] = "Policy";
  }
  if (!root.IsMap()) return Bad(path, nullptr, "", "not a mapping; not updated");
  std::vector<std::string> allow;
  if (root["allow"]) {
    if (!root["allow"].IsSequence()) return Bad(path, nullptr, "/allow", "allow is not a list; not updated");
    for (const auto& n : root["allow"]) allow.push_back(n.as<std::string>());
  }
  std::vector<std::string> next;
  for (const auto& a : allow) {
    if (std::find(remove.begin(), remove.end(), a) == remove.end()) next.push_back(a);
  }
  for (const auto& a : add) {
    if (std::find(next.begin(), next.end(), a) == next.end()) next.push_back(a);
  }
  if (next == allow && fs::exists(path, ec)) return Status::Ok();
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& a : next) list.push_back(a);
  root["allow"] = list;
  YAML::Emitter em;
  em.SetStringFormat(YAML::DoubleQuoted);
  em << root;
  const std::string text =
      std::string("# Written by tollgate (\"allow always\" approvals); safe to edit.\n") + em.c_str() + "\n";
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) return Bad(path, nullptr, "", "cannot write " + tmp);
  }
  if (FILE* f = std::fopen(tmp.c_str(), "r")) {  // durable before it replaces the old one
    ::fsync(fileno(f));
    std::fclose(f);
  }
  fs::rename(tmp, path, ec);
  if (ec) return Bad(path, nullptr, "", "cannot replace it: " + ec.message());
  *changed = true;
  return Status::Ok();
}

}  // namespace tollgate
