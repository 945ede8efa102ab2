#include "audit/query_params.h"

#include <charconv>
#include <utility>

#include "core/event.h"

namespace tollgate {
namespace {

Status Bad(const std::string& key, const std::string& what) {
  return Status::Error(errc::kInvalidQuery, key + " must be " + what);
}

Status ReadString(const Json& params, const char* key, std::string* out) {
  auto it = params.find(key);
  if (it == params.end()) return Status::Ok();
  if (!it->is_string()) return Bad(key, "a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

// Appends the comma-separated names of `text`, skipping empty ones.
void SplitTypes(const std::string& text, std::vector<std::string>* out) {
  for (size_t at = 0; at <= text.size();) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    if (comma > at) out->push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
}

Status ReadTypes(const Json& params, std::vector<std::string>* out) {
  auto it = params.find("types");
  if (it == params.end()) return Status::Ok();
  if (it->is_string()) {
    SplitTypes(it->get<std::string>(), out);
    return Status::Ok();
  }
  if (!it->is_array()) return Bad("types", "a list of strings");
  for (const Json& t : *it) {
    if (!t.is_string()) return Bad("types", "a list of strings");
    SplitTypes(t.get<std::string>(), out);
  }
  return Status::Ok();
}

Status ReadTime(const Json& params, const char* key, std::optional<int64_t>* out) {
  auto it = params.find(key);
  if (it == params.end()) return Status::Ok();
  int64_t us = 0;
  if (!it->is_string() || !ParseTime(it->get<std::string>(), &us)) return Bad(key, "an RFC 3339 time");
  *out = us;
  return Status::Ok();
}

Status ReadLimit(const Json& params, size_t* out) {
  auto it = params.find("limit");
  if (it == params.end()) return Status::Ok();
  if (it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0)) {
    *out = it->get<size_t>();
    return Status::Ok();
  }
  if (it->is_string()) {
    // Digits only: "10abc", "-1" and " 10" are not limits.
    const std::string& s = it->get_ref<const std::string&>();
    size_t n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (!s.empty() && s[0] != '-' && ec == std::errc() && end == s.data() + s.size()) {
      *out = n;
      return Status::Ok();
    }
  }
  return Bad("limit", "a non-negative integer");
}

Status ReadDescending(const Json& params, bool* out) {
  auto it = params.find("descending");
  if (it == params.end()) return Status::Ok();
  if (it->is_boolean()) {
    *out = it->get<bool>();
  } else if (it->is_string()) {
    *out = *it == "1" || *it == "true";
  } else {
    return Bad("descending", "a boolean");
  }
  return Status::Ok();
}

}  // namespace

Status AuditQueryFromParams(const Json& params, AuditQuery* q) {
  if (!params.is_object()) return Status::Error(errc::kInvalidQuery, "the parameters must be a JSON object");
  const std::pair<const char*, std::string*> strings[] = {
      {"org_id", &q->org_id},         {"agent_id", &q->agent_id}, {"session_id", &q->session_id},
      {"request_id", &q->request_id}, {"tool", &q->tool},         {"verdict", &q->verdict},
      {"cursor", &q->cursor}};
  for (const auto& [key, field] : strings) {
    Status s = ReadString(params, key, field);
    if (!s.ok()) return s;
  }
  for (Status s : {ReadTypes(params, &q->types), ReadTime(params, "since", &q->since_us),
                   ReadTime(params, "until", &q->until_us), ReadLimit(params, &q->limit),
                   ReadDescending(params, &q->descending)}) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Json AuditParamsFromQueryString(const std::multimap<std::string, std::string>& query) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"org", "org_id"},    {"agent", "agent_id"},  {"session", "session_id"}, {"request", "request_id"},
      {"tool", "tool"},     {"verdict", "verdict"}, {"since", "since"},        {"until", "until"},
      {"cursor", "cursor"}, {"limit", "limit"},     {"desc", "descending"}};
  Json params = Json::object();
  for (const auto& [name, key] : kNames) {
    auto range = query.equal_range(name);
    if (range.first != range.second && !range.first->second.empty()) params[key] = range.first->second;
  }
  Json types = Json::array();
  for (auto [it, end] = query.equal_range("type"); it != end; ++it) types.push_back(it->second);
  if (!types.empty()) params["types"] = std::move(types);
  return params;
}

}  // namespace tollgate
