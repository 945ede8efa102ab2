#include "tests/seeds/seed_suite.h"

#include <fstream>
#include <sstream>

namespace tollgate::testing {
namespace {

// "data.size" -> result["data"]["size"], or null.
Json At(const Json& j, const std::string& dotted) {
  const Json* cur = &j;
  std::stringstream ss(dotted);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (!cur->is_object() || !cur->contains(part)) return Json();
    cur = &(*cur)[part];
  }
  return *cur;
}

}  // namespace

SeedSuite SeedSuite::Load(const std::string& path) {
  SeedSuite s;
  s.file = path.substr(path.rfind('/') + 1);
  std::ifstream in(path);
  s.doc = Json::parse(in);
  return s;
}

std::vector<std::string> SeedSuite::Items() const {
  std::vector<std::string> out;
  for (const auto& [kind, list] : doc["items"].items()) {
    for (const Json& i : list) out.push_back(kind + ":" + i.get<std::string>());
  }
  return out;
}

std::set<std::string> SeedSuite::Covers(const Json& ex) const {
  // An example may call a tool by another of its names (Kaizen's
  // mcp__kaizen_builtin__X is X): "name_of" is the tool it stands for.
  const std::string tool = ex.value("name_of", ex["tool"].get<std::string>());
  const Json& expect = ex["expect"];
  std::set<std::string> c{"tools:" + tool, "names:" + ex["tool"].get<std::string>()};
  if (expect.contains("danger")) c.insert("danger:" + tool);
  for (const auto& [k, v] : ex["args"].items()) c.insert("params:" + tool + "." + k);
  if (ex["args"].contains("action") && ex["args"]["action"].is_string()) {
    c.insert("actions:" + tool + "." + ex["args"]["action"].get<std::string>());
  }
  for (const Json& f : expect.value("data", Json::array()))
    c.insert("fields:" + tool + "." + f.get<std::string>());
  if (expect.contains("success")) c.insert("contract:success");
  if (expect.contains("data")) c.insert("contract:data");
  for (const Json& f : expect.value("meta", Json::array())) c.insert("contract:meta." + f.get<std::string>());
  if (expect.contains("error")) {
    c.insert("errors:" + expect["error"].get<std::string>());
    c.insert("contract:error.code");
    c.insert("contract:error.message");
  }
  if (expect.contains("recoverable")) c.insert("contract:error.recoverable");
  for (const Json& i : ex.value("covers", Json::array())) c.insert(i.get<std::string>());
  for (const Json& f : expect.value("error_fields", Json::array()))
    c.insert("contract:error." + f.get<std::string>());
  // Only what the seed documents counts.
  std::set<std::string> documented;
  for (const std::string& i : Items()) documented.insert(i);
  std::set<std::string> out;
  for (const std::string& i : c) {
    if (documented.count(i)) out.insert(i);
  }
  return out;
}

std::string SeedSuite::Check(const Json& ex, const Json& r, const Json& server_got,
                             const std::string& danger) {
  const Json& server_got_json = server_got.value("json", Json());
  const Json& expect = ex["expect"];
  if (!r.is_object()) return "no ToolResult";
  if (expect.contains("danger") && danger != expect["danger"]) return "danger is " + danger;
  if (expect.contains("success") && r.value("success", !expect["success"].get<bool>()) != expect["success"]) {
    return "success is not " + expect["success"].dump();
  }
  for (const Json& f : expect.value("data", Json::array())) {
    if (!r["data"].is_object() || !r["data"].contains(f.get<std::string>())) return "data has no " + f.dump();
  }
  for (const Json& f : expect.value("meta", Json::array())) {
    if (!r["meta"].is_object() || !r["meta"].contains(f.get<std::string>())) return "meta has no " + f.dump();
  }
  const Json equals = expect.value("equals", Json::object());  // items() must not outlive it
  for (const auto& [path, want] : equals.items()) {
    if (At(r, path) != want) return path + " is " + At(r, path).dump() + ", not " + want.dump();
  }
  if (expect.contains("error")) {
    const Json& e = r["error"];
    if (!e.is_object()) return "no error";
    if (e.value("code", "") != expect["error"])
      return "error.code is " + e.value("code", "") + ", not " + expect["error"].dump();
    if (!e.contains("message") || !e["message"].is_string()) return "error.message is missing";
  }
  if (expect.contains("recoverable") && At(r, "error.recoverable") != expect["recoverable"]) {
    return "error.recoverable is not " + expect["recoverable"].dump();
  }
  for (const Json& f : expect.value("error_fields", Json::array())) {
    if (At(r, "error." + f.get<std::string>()).is_null()) return "error has no " + f.dump();
  }
  if (expect.contains("server_got_json") && server_got_json != expect["server_got_json"]) {
    return "the server got " + server_got_json.dump();
  }
  const Json headers = expect.value("server_got_headers", Json::object());
  for (const auto& [name, want] : headers.items()) {
    if (server_got["headers"].value(name, "") != want)
      return "the server got header " + name + ": " + server_got["headers"].value(name, "");
  }
  if (expect.contains("server_got_query") && server_got.value("query", "") != expect["server_got_query"]) {
    return "the server got query " + server_got.value("query", "");
  }
  return "";
}

std::string SeedSuite::Coverage(const std::set<std::string>& served) const {
  const std::vector<std::string> items = Items();
  size_t n = 0;
  std::string missing;
  for (const std::string& i : items) {
    if (served.count(i)) {
      ++n;
    } else if (!doc.value("elsewhere", Json::object()).contains(i.substr(i.find(':') + 1))) {
      missing += " " + i;
    }
  }
  const size_t elsewhere = doc.value("elsewhere", Json::object()).size();
  return "seed " + doc["seed"].get<std::string>() + " (" + doc["title"].get<std::string>() +
         "): " + std::to_string(n) + " of " + std::to_string(items.size()) +
         " documented items served here, " + std::to_string(elsewhere) + " shown elsewhere" +
         (missing.empty() ? "" : "; not served:" + missing);
}

Json Substitute(const Json& args, const std::string& server, const std::string& closed) {
  if (args.is_string()) {
    std::string s = args;
    for (const auto& [from, to] :
         {std::pair{std::string("{{server}}"), server}, {std::string("{{closed}}"), closed}}) {
      for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, from.size(), to);
    }
    return s;
  }
  if (args.is_object() || args.is_array()) {
    Json out = args;
    for (auto it = out.begin(); it != out.end(); ++it) *it = Substitute(*it, server, closed);
    return out;
  }
  return args;
}

}  // namespace tollgate::testing
