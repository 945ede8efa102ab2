// `tollgate approvals list|approve|deny` and `tollgate tokens add`.
//
// The log is read as a RocksDB secondary (like `audit`), so these work while
// `tollgate up` writes it. approve/deny publish an approval response to the
// approval-responses topic (found through endpoints.json) and wait for the
// approve stage's verdict on it in the log. The CLI is an operator's tool on
// the machine that holds the log: --as names the approver without a token;
// remote approvers use the HTTP API (docs/http_api.md).
// Exit codes: 0 the response was recorded (granted/denied), 1 refused or no
// such approval, 2 usage or connection error, 3 no verdict within --timeout.
#include <iostream>
#include <thread>

#include "api/tokens.h"
#include "audit/approvals.h"
#include "audit/log_sink.h"
#include "cli/commands.h"
#include "cli/pipeline.h"
#include "core/messages.h"
#include "core/schema.h"

namespace tollgate::cli {
namespace {

int Fail(const std::string& what) {
  std::cerr << "tollgate: " << what << "\n";
  return 2;
}

struct ListFlags {
  std::string data = kDefaultDataDir;
  PendingFilter filter;
};

int RunList(const ListFlags& f) {
  std::unique_ptr<LogStore> store;
  Status s = LogStore::Open(f.data + "/log", OpenMode::kSecondary, &store);
  if (s.ok()) s = store->CatchUp();
  std::vector<PendingApproval> pending;
  if (s.ok()) s = ListPendingApprovals(*store, f.filter, &pending);
  if (!s.ok()) return Fail(s.ToString());
  for (const auto& p : pending) std::cout << p.ToJson().dump() << "\n";
  std::cerr << pending.size() << " pending\n";
  return 0;
}

struct RespondFlags {
  std::string data = kDefaultDataDir, brokers, topic_prefix;
  std::string id, as, comment, args_hash;
  bool always = false;
  int timeout_s = 10;
};

int RunRespond(const RespondFlags& f, const std::string& decision) {
  BusConfig bus;
  bus.brokers = f.brokers;
  bus.topics.prefix = f.topic_prefix.empty() ? "tollgate." : f.topic_prefix;
  if (bus.brokers.empty()) {
    Json ep;
    Status s = ReadEndpoints(f.data, &ep);
    if (!s.ok()) return Fail(s.ToString());
    bus.brokers = ep.value("bootstrap", "");
    if (f.topic_prefix.empty()) bus.topics.prefix = ep.value("topic_prefix", "tollgate.");
  }
  std::unique_ptr<LogStore> store;
  Status s = LogStore::Open(f.data + "/log", OpenMode::kSecondary, &store);
  if (s.ok()) s = store->CatchUp();
  if (!s.ok()) return Fail(s.ToString());
  StoreLogView view(*store);
  std::vector<Event> events;
  s = view.EventsOfRequest(f.id, &events);
  if (!s.ok()) return Fail(s.ToString());
  RequestState st = Summarize(events);
  if (st.approval_requested == nullptr) {
    std::cerr << "tollgate: no approval was requested for '" << f.id << "' (see `tollgate approvals list`)\n";
    return 1;
  }
  Json resp{{"request_id", f.id},
            {"decision", decision},
            {"approver", f.as},
            {"scope", f.always ? "always" : "once"},
            {"args_hash", f.args_hash.empty() ? st.approval_requested->data.value("args_hash", "") : f.args_hash},
            {"response_id", "cli-" + NewToken().substr(0, 24)}};
  if (!f.comment.empty()) resp["comment"] = f.comment;
  s = SchemaRegistry::Builtin().Validate("approval_response", resp);
  if (!s.ok()) return Fail(s.ToString());
  Json request = st.received ? st.received->data.value("request", Json::object())
                             : Json{{"request_id", f.id}, {"agent_id", st.approval_requested->agent_id}};
  std::unique_ptr<Producer> producer;
  s = Producer::Open(bus, "", &producer);
  if (s.ok()) s = producer->Send(MessageFor(bus.topics.approval_responses(), request, resp));
  if (s.ok()) s = producer->Flush(std::chrono::seconds(10));
  if (!s.ok()) return Fail("cannot publish: " + s.ToString());
  const std::string response_id = resp["response_id"];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!store->CatchUp().ok() || !view.EventsOfRequest(f.id, &events).ok()) continue;
    for (const Event& e : events) {
      if (e.data.value("response_id", "") != response_id) continue;
      RequestState now = Summarize(events);
      Json out{{"request_id", f.id}, {"event", e.type}, {"approval_pending", now.approval_pending()},
               {"settled", now.approval_settled ? now.approval_settled->type : ""}, {"log_seq", e.seq}};
      if (e.type == "approval.refused") {
        out["outcome"] = "refused";
        out["error"] = {{"code", e.data.value("code", "")}, {"message", e.data.value("message", "")}};
      } else {
        out["outcome"] = e.type == "approval.granted" ? "granted" : "denied";
        if (now.approval_pending()) out["granted_by"] = now.grants.size(), out["needed"] = now.approvers_needed;
      }
      std::cout << out.dump(2) << std::endl;
      return e.type == "approval.refused" ? 1 : 0;
    }
  }
  std::cerr << "tollgate: the response was published, but the approve stage did not record a verdict within "
            << f.timeout_s << " s (is `tollgate up` running?)\n";
  return 3;
}

}  // namespace

void AddApprovalsCommands(CLI::App& app, int* exit_code) {
  auto* approvals = app.add_subcommand("approvals", "list pending approvals; approve or deny one");
  approvals->require_subcommand(1);

  auto lf = std::make_shared<ListFlags>();
  auto* list = approvals->add_subcommand("list", "print pending approvals as JSON lines");
  list->add_option("--data", lf->data, "data directory of `tollgate up`")->capture_default_str();
  list->add_option("--org", lf->filter.org_id, "only this org");
  list->add_option("--agent", lf->filter.agent_id, "only this agent");
  list->callback([lf, exit_code] { *exit_code = RunList(*lf); });

  for (const char* decision : {"approve", "deny"}) {
    auto f = std::make_shared<RespondFlags>();
    auto* cmd = approvals->add_subcommand(decision, std::string(decision) + " a pending request");
    cmd->add_option("id", f->id, "request id")->required();
    cmd->add_option("--as", f->as, "approver identity")->required();
    cmd->add_option("--comment", f->comment, "a comment for the record");
    if (std::string(decision) == "approve") {
      cmd->add_flag("--always", f->always, "also allow this exact call for the agent from now on (policy.updated)");
    }
    cmd->add_option("--args-hash", f->args_hash, "the args hash approved (default: the pending request's)");
    cmd->add_option("--data", f->data, "data directory of `tollgate up`")->capture_default_str();
    cmd->add_option("--brokers", f->brokers, "Kafka bootstrap servers (instead of endpoints.json)");
    cmd->add_option("--topic-prefix", f->topic_prefix, "topic name prefix");
    cmd->add_option("--timeout", f->timeout_s, "seconds to wait for the verdict")->capture_default_str();
    const std::string d = std::string(decision) == "approve" ? "approve" : "deny";
    cmd->callback([f, d, exit_code] { *exit_code = RunRespond(*f, d); });
  }

  struct TokenFlags {
    std::string data = kDefaultDataDir, file;
    Principal who;
  };
  auto tf = std::make_shared<TokenFlags>();
  auto* tokens = app.add_subcommand("tokens", "manage the HTTP API's bearer tokens");
  tokens->require_subcommand(1);
  auto* add = tokens->add_subcommand("add", "create a token; prints it once (only its hash is stored)");
  add->add_option("--data", tf->data, "data directory (tokens in DATA/tokens.json)")->capture_default_str();
  add->add_option("--file", tf->file, "tokens file (default DATA/tokens.json)");
  add->add_option("--identity", tf->who.identity, "who the token is (the approver name)")->required();
  add->add_option("--org", tf->who.org_id, "its org (\"*\" for an admin of every org)")->required();
  add->add_option("--role", tf->who.roles, "agent, approver, auditor or admin (repeatable)")->required();
  add->callback([tf, exit_code] {
    for (const auto& r : tf->who.roles) {
      bool known = false;
      for (const char* k : kRoles) known = known || r == k;
      if (!known) {
        *exit_code = Fail("unknown role '" + r + "' (agent, approver, auditor, admin)");
        return;
      }
    }
    std::string token;
    Status s = AddToken(tf->file.empty() ? tf->data + "/tokens.json" : tf->file, tf->who, &token);
    if (!s.ok()) {
      *exit_code = Fail(s.ToString());
      return;
    }
    std::cout << token << std::endl;
    std::cerr << "restart `tollgate up` to load it\n";
    *exit_code = 0;
  });
}

}  // namespace tollgate::cli
