// memory (Duragent's; docs/tools.md, "memory") {action: recall | remember |
// reflect | update_world}: an agent's memories and world model, per (org,
// agent), kept in the log and nowhere else.
//
// The store is a fold over the log: each successful remember, reflect and
// update_world call's execution.completed event IS the write (its result
// data holds what was written), so audit, verify and replay see every
// write, and nothing outside the log can drift from it. recall reads the
// newest kMaxScan such events of this org and agent (tool "memory")
// through ToolContext::audit; the reader is scoped to the caller's org, and
// the query to the caller's agent, so no agent reads another's memory.
// What the log holds is redacted (docs/redaction.md): a secret remembered
// is recalled as [REDACTED].
//
// - remember {content, tags?} -> {action, memory_id, content, tags, kind:
//   "memory", created_at}; memory_id is derived from the request id.
// - update_world {content} -> {action, world, updated_at}: the newest
//   replaces the agent's world model.
// - recall {query?, limit? (10)} -> {memories: [{memory_id, kind, content,
//   tags, created_at, score?}], count, world: {content, updated_at} | null,
//   scanned, truncated}. Without a query the newest; with one, those
//   sharing a word with it (case-insensitive), most shared words first,
//   then newest.
// - reflect -> the newest kReflectOn memories summarised by the model at
//   execute.memory.llm (an OpenAI-compatible chat-completions endpoint,
//   endpoint_call.h), kept as a memory of kind "reflection": {action,
//   memory_id, content, tags: ["reflection"], kind, created_at, model,
//   memories_used}. No endpoint configured: E_NOT_CONFIGURED.
#include <algorithm>
#include <set>

#include "core/event.h"
#include "core/sha256.h"
#include "execute/net_pin.h"
#include "execute/tools/audit_scan.h"
#include "execute/tools/endpoint_call.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

constexpr size_t kMaxScan = 1000;              // execution.completed events read per fold
constexpr size_t kMaxContentBytes = 64 << 10;  // 16384 characters (the schema) of up to 4 bytes
constexpr size_t kMaxTagChars = 128;
constexpr size_t kReflectOn = 50;             // memories sent to the model
constexpr size_t kReflectMemoryBytes = 2048;  // each, cut
constexpr size_t kMaxReflectionBytes = 16 << 10;
constexpr const char* kNotConfigured = "E_NOT_CONFIGURED";

struct Memory {
  std::string id, kind, content, created_at;
  Json tags = Json::array();
};

struct Store {
  std::vector<Memory> memories;  // newest first
  Json world;                    // {content, updated_at} | null
  size_t scanned = 0;
  bool truncated = false;
};

std::string Str(const Json& o, const char* k) {
  return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : "";
}

std::string CutUtf8(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t k = max;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return s.substr(0, k);
}

// The agent's store, folded from its memory calls' execution.completed events.
Json Fold(const ToolContext& ctx, Store* store) {
  const Json q{
      {"agent_id", ctx.agent_id}, {"tool", "memory"}, {"types", Json::array({ev::kExecutionCompleted})}};
  Json err = ScanAudit(
      ctx, q, kMaxScan,
      [&](const Json& e) {
        ++store->scanned;
        if (Str(e, "agent_id") != ctx.agent_id || Str(e, "tool") != "memory")
          return true;  // the reader's word, checked
        const Json& data = e.contains("data") ? e["data"] : Json();
        const Json& r = data.is_object() && data.contains("result") ? data["result"] : Json();
        if (!r.is_object() || !r.value("success", false) || !r.contains("data") || !r["data"].is_object())
          return true;
        const Json& d = r["data"];
        const std::string action = Str(d, "action");
        if (action == "update_world") {
          if (store->world.is_null())
            store->world = {{"content", Str(d, "world")}, {"updated_at", Str(d, "updated_at")}};
        } else if (action == "remember" || action == "reflect") {
          Memory m{Str(d, "memory_id"), action == "reflect" ? "reflection" : "memory", Str(d, "content"),
                   Str(d, "created_at")};
          if (d.contains("tags") && d["tags"].is_array()) m.tags = d["tags"];
          store->memories.push_back(std::move(m));
        }
        return true;
      },
      &store->truncated);
  return err;
}

// Lower-cased words (ASCII letters and digits; other UTF-8 bytes belong to words).
std::set<std::string> Words(const std::string& s, size_t max_words) {
  std::set<std::string> out;
  std::string w;
  auto flush = [&] {
    if (!w.empty() && out.size() < max_words) out.insert(w);
    w.clear();
  };
  for (unsigned char c : s) {
    if (std::isalnum(c) || c >= 0x80) {
      w += static_cast<char>(std::tolower(c));
    } else {
      flush();
    }
  }
  flush();
  return out;
}

Json MemoryJson(const Memory& m) {
  return {{"memory_id", m.id},
          {"kind", m.kind},
          {"content", m.content},
          {"tags", m.tags},
          {"created_at", m.created_at}};
}

class MemoryTool : public BuiltinTool {
 public:
  MemoryTool() : BuiltinTool("memory") {}

  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string action;
    if (!StringArg(args, "action", &action)) {
      return ToolFail(errc::kInvalidArgs, "action must be recall, remember, reflect or update_world");
    }
    if (action == "recall") return Recall(args, ctx);
    if (action == "remember") return Remember(args, ctx);
    if (action == "update_world") return UpdateWorld(args, ctx);
    if (action == "reflect") return Reflect(ctx);
    return ToolFail(errc::kInvalidArgs, "action must be recall, remember, reflect or update_world");
  }

 private:
  static std::string MemoryId(const ToolContext& ctx) {
    return "mem_" + Sha256Hex(ctx.org_id + '\n' + ctx.agent_id + '\n' + ctx.request_id).substr(0, 20);
  }

  static bool Content(const Json& args, std::string* out, Json* error) {
    if (!StringArg(args, "content", out) || out->empty()) {
      *error = ToolFail(errc::kInvalidArgs, "content must be a non-empty string");
      return false;
    }
    if (out->size() > kMaxContentBytes) {
      *error = ToolFail(errc::kTooLarge, "content is over 16384 characters");
      return false;
    }
    return true;
  }

  Json Remember(const Json& args, const ToolContext& ctx) const {
    std::string content;
    Json error;
    if (!Content(args, &content, &error)) return error;
    Json tags = Json::array();
    if (args.contains("tags")) {
      if (!args["tags"].is_array() || args["tags"].size() > 16) {
        return ToolFail(errc::kInvalidArgs, "tags must be a list of at most 16 strings");
      }
      for (const auto& t : args["tags"]) {
        if (!t.is_string() || t.get<std::string>().empty() || t.get<std::string>().size() > kMaxTagChars) {
          return ToolFail(errc::kInvalidArgs, "each tag is a string of 1 to 128 bytes");
        }
        tags.push_back(t);
      }
    }
    return ToolOk({{"action", "remember"},
                   {"memory_id", MemoryId(ctx)},
                   {"kind", "memory"},
                   {"content", content},
                   {"tags", tags},
                   {"created_at", FormatTime(ctx.now_us)}});
  }

  Json UpdateWorld(const Json& args, const ToolContext& ctx) const {
    std::string content;
    Json error;
    if (!Content(args, &content, &error)) return error;
    return ToolOk({{"action", "update_world"}, {"world", content}, {"updated_at", FormatTime(ctx.now_us)}});
  }

  Json Recall(const Json& args, const ToolContext& ctx) const {
    std::string query;
    if (!StringArg(args, "query", &query, false))
      return ToolFail(errc::kInvalidArgs, "query must be a string");
    int64_t limit = 10;
    if (args.contains("limit")) {
      if (!args["limit"].is_number_integer() || args["limit"].get<int64_t>() < 1 ||
          args["limit"].get<int64_t>() > 100) {
        return ToolFail(errc::kInvalidArgs, "limit must be an integer from 1 to 100");
      }
      limit = args["limit"].get<int64_t>();
    }
    Store store;
    if (Json err = Fold(ctx, &store); !err.is_null()) return err;
    const std::set<std::string> want = Words(query, 32);
    std::vector<std::pair<size_t, size_t>> ranked;  // (score, index: newest first)
    for (size_t i = 0; i < store.memories.size(); ++i) {
      size_t score = 0;
      if (!want.empty()) {
        const Memory& m = store.memories[i];
        std::set<std::string> have = Words(m.content, 4096);
        for (const auto& t : m.tags) {
          if (t.is_string()) have.merge(Words(t.get<std::string>(), 16));
        }
        for (const auto& w : want) score += have.count(w);
        if (score == 0) continue;
      }
      ranked.emplace_back(score, i);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    Json out = Json::array();
    for (const auto& [score, i] : ranked) {
      if (out.size() >= static_cast<size_t>(limit)) break;
      Json m = MemoryJson(store.memories[i]);
      if (!want.empty()) m["score"] = score;
      out.push_back(std::move(m));
    }
    return ToolOk({{"query", query},
                   {"memories", out},
                   {"count", out.size()},
                   {"world", store.world},
                   {"scanned", store.scanned},
                   {"truncated", store.truncated}});
  }

  Json Reflect(const ToolContext& ctx) const {
    const ExecutePolicy& p = *ctx.policy;
    if (p.memory_llm_url.empty()) {
      return ToolFail(
          kNotConfigured,
          "memory reflect is not configured: it needs a language model. Set execute.memory.llm "
          "{url: an OpenAI-compatible .../chat/completions URL, model, api_key} in the policy file "
          "(docs/tools.md, \"memory\")");
    }
    std::string key, missing;
    if (!p.memory_llm_api_key.empty() && (!ExpandEnv(p.memory_llm_api_key, &key, &missing) ||
                                          key.find_first_of("\r\n") != std::string::npos)) {
      return ToolFail(kNotConfigured, "memory reflect is not configured: execute.memory.llm.api_key needs " +
                                          (missing.empty() ? std::string("a value without line breaks")
                                                           : "the unset variable " + missing));
    }
    Store store;
    if (Json err = Fold(ctx, &store); !err.is_null()) return err;
    if (store.memories.empty()) {
      return ToolFail(errc::kInvalidArgs, "there is nothing to reflect on: this agent has no memories yet");
    }
    std::string listing;
    size_t used = 0;
    for (; used < store.memories.size() && used < kReflectOn; ++used) {
      const Memory& m = store.memories[used];
      listing += "- [" + m.created_at + "] " + CutUtf8(m.content, kReflectMemoryBytes) + "\n";
    }
    if (!store.world.is_null()) listing += "\nCurrent world model:\n" + Str(store.world, "content") + "\n";
    const Json body{
        {"model", p.memory_llm_model},
        {"messages",
         Json::array(
             {{{"role", "system"},
               {"content",
                "You reflect on an AI agent's memories. Summarise them in a short paragraph: recurring "
                "themes, lessons learned, open questions. Answer with the reflection only."}},
              {{"role", "user"}, {"content", "Memories, newest first:\n" + listing}}})}};
    EndpointCall call;
    call.what = "the memory model endpoint";
    call.url = p.memory_llm_url;
    call.method = "POST";
    call.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
    call.headers = {"Content-Type: application/json", "Accept: application/json"};
    if (!key.empty()) call.headers.push_back("Authorization: Bearer " + key);
    call.timeout_ms = p.memory_llm_timeout_ms;
    EndpointAnswer answer;
    Json error;
    if (!CallEndpoint(call, p.allow_cidrs, &answer, &error)) return error;
    const Json& a = answer.json;
    std::string text;
    if (a.is_object() && a.contains("choices") && a["choices"].is_array() && !a["choices"].empty() &&
        a["choices"][0].is_object() && a["choices"][0].contains("message")) {
      text = Str(a["choices"][0]["message"], "content");
    }
    if (text.empty())
      return ToolFail(errc::kHttp, "the memory model's answer is not a chat completion with content");
    return ToolOk({{"action", "reflect"},
                   {"memory_id", MemoryId(ctx)},
                   {"kind", "reflection"},
                   {"content", CutUtf8(ToValidUtf8(text), kMaxReflectionBytes)},
                   {"tags", Json::array({"reflection"})},
                   {"created_at", FormatTime(ctx.now_us)},
                   {"model", p.memory_llm_model},
                   {"memories_used", used}});
  }
};

}  // namespace

std::unique_ptr<Tool> MakeMemory() { return std::make_unique<MemoryTool>(); }

}  // namespace tollgate
