// list_llm_models (the AI Orchestrator seed's): the LLM models this
// deployment offers, grouped as the seed groups them. Where the names come
// from is the operator's choice, never the agent's (it has no arguments):
// - execute.llm_models: a list of names;
// - execute.llm_models_url: an Ollama-compatible server, asked
//   GET <url>/api/tags ({"models": [{"name": ...}, ...]}) through
//   endpoint_call.h (http_request's SSRF guard: every address it resolves
//   to global or in execute.network.allow_cidrs, the connection pinned to
//   it; no redirect followed), within llm_models_timeout_ms and
//   kMaxAnswerBytes.
// Both set: the names of both, each once. Neither: E_NOT_CONFIGURED.
// data: {models: {general, code, vision, embedding, cloud: [names]}, count,
// source: "config" | "endpoint" | "config+endpoint"}.
#include <algorithm>
#include <set>

#include "execute/tools/endpoint_call.h"
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

// The names the server lists, or the ToolResult of why not.
bool FetchTags(const ExecutePolicy& p, std::vector<std::string>* names, Json* error) {
  std::string base = p.llm_models_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  EndpointCall call;
  call.what = "execute.llm_models_url's model server";
  call.url = base + "/api/tags";
  call.timeout_ms = p.llm_models_timeout_ms;
  call.max_bytes = kMaxAnswerBytes;
  EndpointAnswer answer;
  if (!CallEndpoint(call, p.allow_cidrs, &answer, error)) return false;
  if (!answer.json.is_object() || !answer.json.contains("models") || !answer.json["models"].is_array()) {
    *error = ToolFail(errc::kHttp, "the answer of " + call.what + " is not an Ollama /api/tags list");
    return false;
  }
  for (const auto& m : answer.json["models"]) {
    const Json* n = m.is_object() && m.contains("name") ? &m["name"] : m.is_object() ? nullptr : &m;
    if (n != nullptr && n->is_string() && !n->get<std::string>().empty()) names->push_back(*n);
  }
  return true;
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
