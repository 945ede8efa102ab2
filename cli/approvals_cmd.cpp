// `tollgate approvals list|approve|deny`.
//
// list reads the log as a RocksDB secondary (like `audit`), so it works
// while `tollgate up` writes it. approve/deny call the running up's HTTP API
// (POST /v1/approvals/{id}) with the approver's token, which publishes a
// signed response and waits for the approve stage's verdict on it
// (docs/trust.md): the approver is the token's identity, never a flag.
// `approve --declassify --comment WHY` also declassifies the request's
// session (docs/approvals.md, "Declassify").
// Exit codes: 0 the response was recorded (granted/denied), 1 refused or no
// such approval, 2 usage or connection error, 3 no verdict in time.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "api/approval_response.h"
#include "audit/approvals.h"
#include "cli/admin_client.h"
#include "cli/commands.h"
#include "core/event.h"

namespace tollgate::cli {
namespace {

int Fail(const std::string& what) {
  std::cerr << "tollgate: " << what << "\n";
  return 2;
}

struct ListFlags {
  std::string data = kDefaultDataDir;
  PendingFilter filter;
  bool json = false;
};

// "12m 5s" / "3h 20m" / "expired".
std::string TimeLeft(int64_t us) {
  if (us <= 0) return "expired";
  const int64_t s = us / 1'000'000;
  if (s < 3600) return std::to_string(s / 60) + "m " + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h " + std::to_string(s % 3600 / 60) + "m";
}

// Printable on a terminal: control bytes become '?', so agent-supplied text
// cannot move the cursor or forge a row.
std::string Printable(const std::string& v) {
  std::string out;
  for (unsigned char c : v) out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  return out;
}

// The call's arguments as logged (secrets redacted), for a person to judge:
// compact JSON with non-ASCII escaped (no look-alike or right-to-left text
// can disguise them), the first kMaxShownArgs characters and a marker.
constexpr size_t kMaxShownArgs = 200;
std::string ShownArgs(const Json& request) {
  const Json args = request.is_object() ? request.value("args", Json::object()) : Json::object();
  std::string text = args.dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
  if (text.size() <= kMaxShownArgs) return text;
  const size_t more = text.size() - kMaxShownArgs;
  return text.substr(0, kMaxShownArgs) + " ... (" + std::to_string(more) +
         " more characters; --json shows all)";
}

// One row per approval, for a person at a terminal, and under it the call's
// arguments. The whole request id (at most kMaxIdBytes; its column is as
// wide as the longest), since it is what `approvals approve` takes; other
// agent-supplied cells are cut to their column.
void PrintTable(const std::vector<PendingApproval>& pending, int64_t now_us) {
  auto cell = [](const std::string& v, size_t w) {
    std::string out = Printable(v);
    if (out.size() > w) out = out.substr(0, w - 1) + "~";
    return out + std::string(w - out.size() + 2, ' ');
  };
  size_t id_width = 7;  // "REQUEST"
  for (const auto& p : pending) id_width = std::max(id_width, std::min(p.request_id.size(), kMaxIdBytes));
  std::cout << cell("REQUEST", id_width) << cell("ORG", 12) << cell("AGENT", 16) << cell("TOOL", 20)
            << cell("DANGER", 8) << cell("APPROVED", 8) << "EXPIRES IN\n";
  for (const auto& p : pending) {
    const std::string danger = p.decision.is_object() ? p.decision.value("danger_level", "") : "";
    std::cout << cell(p.request_id, id_width) << cell(p.org_id, 12) << cell(p.agent_id, 16)
              << cell(p.tool, 20) << cell(danger, 8)
              << cell(std::to_string(p.granted_by.size()) + "/" + std::to_string(p.approvers_needed), 8)
              << TimeLeft(p.deadline_us - now_us) << "\n"
              << "  args " << Printable(ShownArgs(p.request)) << "\n";
  }
}

int RunList(const ListFlags& f) {
  std::unique_ptr<LogStore> store;
  Status s = OpenLogReader(f.data, &store);
  std::vector<PendingApproval> pending;
  if (s.ok()) s = ListPendingApprovals(*store, f.filter, &pending);
  if (!s.ok()) return Fail(s.ToString());
  const bool table = !f.json && isatty(STDOUT_FILENO);
  if (table) {
    PrintTable(pending, NowMicros());
  } else {
    for (const auto& p : pending) std::cout << p.ToJson().dump() << "\n";
  }
  std::cerr << pending.size() << " pending"
            << (table ? " (--json: the whole approval: rule, approvers, every argument)" : "") << "\n";
  return 0;
}

struct RespondFlags {
  std::string data = kDefaultDataDir, token_file, org;
  std::string id, as, comment, args_hash;
  bool always = false;
  bool declassify = false;
};

// The org of the pending approval `id` when the caller does not say: the
// one org with such a pending request (ids are per org).
Status OrgOfPending(const std::string& data, const std::string& id, std::string* org) {
  std::unique_ptr<LogStore> store;
  Status s = OpenLogReader(data, &store);
  std::vector<PendingApproval> pending;
  if (s.ok()) s = ListPendingApprovals(*store, {}, &pending);
  if (!s.ok()) return s;
  std::set<std::string> orgs;
  for (const auto& p : pending) {
    if (p.request_id == id) orgs.insert(p.org_id);
  }
  if (orgs.size() > 1)
    return Status::Error(errc::kInvalidQuery, "'" + id + "' is pending in several orgs: name one with --org");
  if (orgs.empty()) return Status::Error(errc::kNotFound, "no approval is pending for '" + id + "'");
  *org = *orgs.begin();
  return Status::Ok();
}

// approve/deny go through the HTTP API of the running `up`, as the token's
// identity: a quorum counts authenticated identities, so there is no way
// to name an approver on the command line.
int RunRespond(const RespondFlags& f, const std::string& decision) {
  if (!f.as.empty()) {
    std::cerr
        << "tollgate: --as names no one: an approval counts only from an authenticated identity. Approve "
           "with that approver's token (--token-file FILE or $TOLLGATE_TOKEN); a local operator's "
           "DATA/admin.token is the identity \"admin\"\n";
    return 2;
  }
  // A declassify clears the session's history labels for later decisions:
  // only with a grant, and with its reason for the record.
  if (f.declassify && decision != "approve") return Fail("--declassify goes with approve only");
  if (f.declassify && f.comment.find_first_not_of(" \t\r\n") == std::string::npos)
    return Fail("--declassify needs --comment WHY: the reason the session is clean again is logged");
  AdminTarget t{f.data, f.token_file};
  std::string token;
  Status s = ResolveToken(t, &token);
  if (!s.ok()) return Fail(s.ToString());
  const std::string url = LiveApiUrl(f.data);
  if (url.empty())
    return Fail("no running `tollgate up` with an HTTP API found through " + f.data + "/endpoints.json");
  std::string org = f.org;
  if (org.empty()) {
    s = OrgOfPending(f.data, f.id, &org);
    if (s.code() == errc::kNotFound) {
      std::cerr << "tollgate: " << s.message() << " (see `tollgate approvals list`)\n";
      return 1;
    }
    if (!s.ok()) return Fail(s.ToString());
  }
  const Json body = ApprovalAnswer(decision, f.always, f.comment, f.args_hash, f.declassify);
  int status = 0;
  Json reply;
  s = ApiCall(url, token, "POST", "/v1/approvals/" + EncodeQueryParam(f.id) + "?org=" + EncodeQueryParam(org),
              body.dump(), &status, &reply);
  if (status == 0) return Fail(s.ToString());
  std::cout << reply.dump(2) << std::endl;
  if (status == 200) return 0;
  if (status == 202) return 3;
  return status == 409 || status == 404 ? 1 : 2;
}

}  // namespace

void AddApprovalsCommands(CLI::App& app, int* exit_code) {
  auto* approvals = app.add_subcommand("approvals", "list pending approvals; approve or deny one");
  approvals->require_subcommand(1);

  auto lf = std::make_shared<ListFlags>();
  auto* list = approvals->add_subcommand(
      "list", "pending approvals, newest last: a table on a terminal, JSON lines otherwise (or with --json)");
  list->add_flag("--json", lf->json, "JSON lines (the whole approval: arguments, decision, approvers)");
  list->add_option("--data", lf->data, "data directory of `tollgate up`")->capture_default_str();
  list->add_option("--org", lf->filter.org_id, "only this org");
  list->add_option("--agent", lf->filter.agent_id, "only this agent");
  list->callback([lf, exit_code] { *exit_code = RunList(*lf); });

  for (const char* decision : {"approve", "deny"}) {
    auto f = std::make_shared<RespondFlags>();
    auto* cmd = approvals->add_subcommand(
        decision,
        std::string(decision) == "approve"
            ? "approve a pending request (--declassify --comment WHY: and mark its session clean again)"
            : "deny a pending request");
    cmd->add_option("id", f->id, "request id")->required();
    cmd->add_option("--as", f->as, "refused: approvals count only from a token's identity");
    cmd->add_option("--token-file", f->token_file,
                    "the approver's token (default $TOLLGATE_TOKEN, else DATA/admin.token)");
    cmd->add_option("--org", f->org, "the request's org (default: the one org where it is pending)");
    cmd->add_option("--comment", f->comment, "a comment for the record");
    if (std::string(decision) == "approve") {
      cmd->add_flag("--always", f->always,
                    "also allow this exact call for the agent from now on (policy.updated)");
      cmd->add_flag("--declassify", f->declassify,
                    "also mark the request's session clean again: its untrusted/secret labels and earlier "
                    "sequence matches no longer count (needs --comment WHY; logged with your name)");
    } else {
      cmd->add_flag("--declassify", f->declassify, "refused: only an approval declassifies a session");
    }
    cmd->add_option("--args-hash", f->args_hash, "the args hash approved (default: the pending request's)");
    cmd->add_option("--data", f->data, "data directory of `tollgate up`")->capture_default_str();
    const std::string d = std::string(decision) == "approve" ? "approve" : "deny";
    cmd->callback([f, d, exit_code] { *exit_code = RunRespond(*f, d); });
  }
}

}  // namespace tollgate::cli
