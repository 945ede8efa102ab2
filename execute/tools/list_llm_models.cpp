// list_llm_models (the AI Orchestrator seed's): the LLM models this
// deployment offers, grouped as the seed groups them. Where the names come
// from is the operator's choice, never the agent's (it has no arguments):
// - execute.llm_models: a list of names;
// - execute.llm_models_url: an Ollama-compatible server, asked
//   GET <url>/api/tags ({"models": [{"name": ...}, ...]}) under http_request's
//   SSRF guard (every address it resolves to global or in
//   execute.network.allow_cidrs, the connection pinned to it; no redirect
//   followed), within llm_models_timeout_ms and kMaxAnswerBytes.
// Both set: the names of both, each once. Neither: E_NOT_CONFIGURED.
// data: {models: {general, code, vision, embedding, cloud: [names]}, count,
// source: "config" | "endpoint" | "config+endpoint"}.
#include <curl/curl.h>

#include <algorithm>
#include <set>

#include "core/url.h"
#include "execute/net_pin.h"
#include "execute/tools/tools.h"

namespace tollgate {

// The category of a model name (lower-cased), by the seed's rules; the
// order matters: "codellama" is code before it is llama, "qwen3-embedding"
// an embedding model before it is qwen.
std::string LlmModelCategory(std::string name) {
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto has = [&](std::initializer_list<const char*> words) {
    for (const char* w : words) {
      if (name.find(w) != std::string::npos) return true;
    }
    return false;
  };
  if (has({"cloud", "kimi", "moonshot"})) return "cloud";
  if (has({"embed", "bge", "minilm"})) return "embedding";
  if (has({"llava", "vision", "-vl", "moondream"})) return "vision";
  if (has({"code"})) return "code";  // deepseek-coder, codellama, codegemma, starcoder, codestral
  return "general";
}

namespace {

inline constexpr const char* kNotConfigured = "E_NOT_CONFIGURED";
inline constexpr size_t kMaxAnswerBytes = 1 << 20;
inline constexpr size_t kMaxModels = 1000;

struct Capped {
  std::string data;
  bool over = false;
};

size_t OnData(char* p, size_t size, size_t n, void* ud) {
  auto* b = static_cast<Capped*>(ud);
  if (b->data.size() + size * n > kMaxAnswerBytes) {
    b->over = true;
    return 0;  // abort the transfer
  }
  b->data.append(p, size * n);
  return size * n;
}

// The names the server lists, or the ToolResult of why not.
bool FetchTags(const ExecutePolicy& p, std::vector<std::string>* names, Json* error) {
  std::string base = p.llm_models_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  NormalUrl url;
  std::string why;
  if (!NormalizeUrl(base + "/api/tags", "", &url, &why)) {
    *error = ToolFail(errc::kUrlForbidden, "execute.llm_models_url: " + why);
    return false;
  }
  Pin pin;
  switch (PinHost(url.host, p.allow_cidrs, &pin, &why)) {
    case PinResult::kForbidden:
      *error = ToolFail(errc::kUrlForbidden, "execute.llm_models_url: " + why);
      return false;
    case PinResult::kUnresolved:
      *error = ToolFail(errc::kHttp, "execute.llm_models_url: " + why, true);
      return false;
    case PinResult::kOk:
      break;
  }
  static const bool once = (curl_global_init(CURL_GLOBAL_DEFAULT), true);
  (void)once;
  CURL* c = curl_easy_init();
  curl_slist* resolve = curl_slist_append(nullptr, PinnedResolveEntry(url.host, url.port, pin).c_str());
  Capped out;
  curl_easy_setopt(c, CURLOPT_URL, url.full.c_str());
  PinConnection(c, resolve, &pin);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(p.llm_models_timeout_ms));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "tollgate/1");
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  curl_slist_free_all(resolve);
  const std::string where = " (" + url.full + ")";
  if (!pin.refused.empty()) {
    *error = ToolFail(errc::kUrlForbidden, "connection refused by the guard: " + pin.refused);
  } else if (out.over) {
    *error = ToolFail(errc::kTooLarge, "the model server's answer is over 1 MiB" + where);
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    *error = ToolFail(
        errc::kHttpTimeout,
        "the model server did not answer within " + std::to_string(p.llm_models_timeout_ms) + " ms" + where,
        true);
  } else if (rc != CURLE_OK) {
    *error = ToolFail(errc::kHttp, std::string("the model server: ") + curl_easy_strerror(rc) + where, true);
  } else if (status != 200) {
    *error = ToolFail(errc::kHttpStatus, "the model server answered HTTP " + std::to_string(status) + where,
                      status >= 500 || status == 429);
  } else {
    Json answer;
    if (!ParseInputJson(out.data, &answer).ok() || !answer.is_object() || !answer.contains("models") ||
        !answer["models"].is_array()) {
      *error = ToolFail(errc::kHttp, "the model server's answer is not an Ollama /api/tags list" + where);
      return false;
    }
    for (const auto& m : answer["models"]) {
      const Json* n = m.is_object() && m.contains("name") ? &m["name"] : m.is_object() ? nullptr : &m;
      if (n != nullptr && n->is_string() && !n->get<std::string>().empty()) names->push_back(*n);
    }
    return true;
  }
  return false;
}

class ListLlmModels : public BuiltinTool {
 public:
  ListLlmModels() : BuiltinTool("list_llm_models") {}
  Json Run(const Json&, const ToolContext& ctx) const override {
    const ExecutePolicy& p = *ctx.policy;
    if (p.llm_models.empty() && p.llm_models_url.empty()) {
      return ToolFail(
          kNotConfigured,
          "no LLM models are configured: set execute.llm_models (names) or execute.llm_models_url "
          "(an Ollama-compatible server)");
    }
    std::vector<std::string> names = p.llm_models;
    std::string source = p.llm_models.empty() ? "" : "config";
    if (!p.llm_models_url.empty()) {
      Json error;
      if (!FetchTags(p, &names, &error)) return error;
      source += source.empty() ? "endpoint" : "+endpoint";
    }
    Json models = Json::object();
    for (const char* c : {"general", "code", "vision", "embedding", "cloud"}) models[c] = Json::array();
    std::set<std::string> seen;
    bool truncated = false;
    for (const auto& raw : names) {
      const std::string n = ToValidUtf8(raw.substr(0, 256));
      if (!seen.insert(n).second) continue;
      if (seen.size() > kMaxModels) {
        truncated = true;
        break;
      }
      models[LlmModelCategory(n)].push_back(n);
    }
    return ToolOk({{"models", models},
                   {"count", std::min(seen.size(), kMaxModels)},
                   {"source", source},
                   {"truncated", truncated}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeListLlmModels() { return std::make_unique<ListLlmModels>(); }

}  // namespace tollgate
