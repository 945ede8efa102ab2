// get_audit_log {session_id?, request_id?, tool?, types?, verdict?, since?,
// until?, limit?, cursor?, descending?, last_n?, scope? ("session" default |
// "agent")}: the calling agent's own entries as `events` and (the AI
// Orchestrator seed's name) `entries`, with their `count`. last_n (the
// seed's) is the newest N, oldest first; with none of limit, cursor,
// descending, since and until it defaults to 20, as in the seed (the other
// filters narrow those 20). A log that cannot be read is E_AUDIT_ERROR
// (alias: the log's own code). Org and agent (and, for scope
// "session", the session) come from the request envelope; args cannot widen
// them: naming another session needs scope "agent", and the query always
// carries the caller's org and agent. proofs: true adds each entry's
// inclusion proof ("proof", a C2SP tlog-proof, or "proof_pending": true)
// and the signed "checkpoint" they are proven against, exactly as GET
// /v1/audit?proofs=1 answers (audit/audit_proofs.h); where no Merkle tree
// is kept, E_NOT_CONFIGURED. With proofs, `entries` (the seed's copy of
// `events`) is left out.
#include <algorithm>

#include "execute/tools/tools.h"

namespace tollgate {
namespace {

constexpr int64_t kDefaultLastN = 20;  // the seed's default

class GetAuditLogTool : public BuiltinTool {
 public:
  GetAuditLogTool() : BuiltinTool("get_audit_log") {}
  Json Run(const Json& args, const ToolContext& ctx) const override {
    if (ctx.audit == nullptr)
      return ToolFail(errc::kAuditError, "the audit log is not readable from this executor");
    std::string scope = "session";
    if (!StringArg(args, "scope", &scope, false) || (scope != "session" && scope != "agent")) {
      return ToolFail(errc::kInvalidArgs, "scope must be session or agent");
    }
    for (const char* k : {"org_id", "agent_id"}) {
      if (args.contains(k) && args[k] != (std::string(k) == "org_id" ? ctx.org_id : ctx.agent_id)) {
        return ToolFail("E_FORBIDDEN",
                        std::string("an agent reads only its own entries: ") + k + " cannot be set");
      }
    }
    // The filters as given: the reader checks them, as it checks the HTTP
    // API's (audit/query_params.h); a bad one is E_INVALID_ARGS below.
    Json q = Json::object();
    for (const char* k :
         {"request_id", "tool", "types", "verdict", "since", "until", "limit", "cursor", "descending"}) {
      if (args.contains(k)) q[k] = args[k];
    }
    int64_t last_n = 0;
    if (args.contains("last_n")) {
      if (!args["last_n"].is_number_integer() || args["last_n"].get<int64_t>() < 1 ||
          args["last_n"].get<int64_t>() > 1000) {
        return ToolFail(errc::kInvalidArgs, "last_n must be an integer from 1 to 1000");
      }
      for (const char* k : {"limit", "cursor", "descending"}) {
        if (args.contains(k))
          return ToolFail(errc::kInvalidArgs, std::string("last_n and ") + k + " do not go together");
      }
      last_n = args["last_n"].get<int64_t>();
    } else if (!args.contains("limit") && !args.contains("cursor") && !args.contains("descending") &&
               !args.contains("since") && !args.contains("until")) {
      last_n = kDefaultLastN;
    }
    if (last_n > 0) {
      q["limit"] = last_n;
      q["descending"] = true;
    }
    q["org_id"] = ctx.org_id;
    q["agent_id"] = ctx.agent_id;
    if (scope == "session") {
      if (args.contains("session_id") && args["session_id"] != ctx.session_id) {
        return ToolFail("E_FORBIDDEN", "scope session reads the calling session only; use scope agent");
      }
      q["session_id"] = ctx.session_id;
    } else if (args.contains("session_id")) {
      if (!args["session_id"].is_string()) return ToolFail(errc::kInvalidArgs, "session_id must be a string");
      q["session_id"] = args["session_id"];  // still within this agent
    }
    if (args.contains("proofs") && !args["proofs"].is_boolean())
      return ToolFail(errc::kInvalidArgs, "proofs must be a boolean");
    const bool proofs = args.value("proofs", false);
    Json page;
    Status s =
        proofs ? ctx.audit->QueryWithProofs(ctx.org_id, q, &page) : ctx.audit->Query(ctx.org_id, q, &page);
    if (!s.ok()) {
      if (s.code() == kNoProofsCode) return ToolFail(s.code(), s.message());  // not a read error
      if (s.code() == "E_INVALID_QUERY") return ToolFail(errc::kInvalidArgs, s.message());
      if (s.code() == "E_FORBIDDEN") return ToolFail(s.code(), s.message());  // a refusal, not a read error
      return ToolResultErrorAs(errc::kAuditError, s.code(), s.message(), true);
    }
    if (last_n > 0 && page.contains("events") && page["events"].is_array()) {
      std::reverse(page["events"].begin(), page["events"].end());
      page.erase("next_cursor");  // the newest N are all that was asked
    }
    if (!page.contains("events") || !page["events"].is_array()) page["events"] = Json::array();
    page["count"] = page["events"].size();
    // The seed's copy, left out with proofs (no seed asks for them): each
    // proof is ~1 KB, and the result must stay within one event.
    if (!proofs) page["entries"] = page["events"];
    return ToolOk(page);
  }
};

}  // namespace

std::unique_ptr<Tool> MakeGetAuditLog() { return std::make_unique<GetAuditLogTool>(); }

}  // namespace tollgate
