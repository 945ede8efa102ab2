// `tollgate agents add|list|revoke|sign` and `tollgate tokens add|list|revoke`
// (docs/trust.md). Changes reach the log through the running up's HTTP API,
// or the log itself when no up runs (cli/admin_client.h); each is a
// credential.* event. Private keys and tokens never reach the log: `agents
// add` writes the agent's private key to a file (mode 0600) and registers
// only its public key; `tokens add` prints the token once.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "core/auth.h"

namespace tollgate::cli {
namespace {

int Fail(const Status& s) {
  std::cerr << "tollgate: " << s.ToString() << "\n";
  return 2;
}

struct AgentFlags {
  std::string data = kDefaultDataDir, token_file, org = "default", agent, out, key_id, reason;
};

int RunAgentsAdd(const AgentFlags& f) {
  const std::string path = f.out.empty() ? DefaultAgentKeyPath(f.data, f.org, f.agent) : f.out;
  Json reply;
  Status s = RegisterAgentKey({f.data, f.token_file}, f.org, f.agent, path, &reply);
  if (!s.ok()) return Fail(s);
  std::cout << reply.dump(2) << std::endl;
  return 0;
}

int RunRevoke(const AdminTarget& t, const std::string& kind, const std::string& org,
              const std::string& identity, const std::string& key_id, const std::string& reason) {
  Json list;
  Status s = ListCredentials(t, kind, org, &list);
  if (!s.ok()) return Fail(s);
  int revoked = 0;
  for (const Json& c : list["credentials"]) {
    if (c.value("revoked", false)) continue;
    if (!key_id.empty() ? c.value("key_id", "") != key_id : c.value("identity", "") != identity) continue;
    Json reply;
    s = RevokeCredential(t, c.value("key_id", ""), reason, &reply);
    if (!s.ok()) return Fail(s);
    std::cout << reply.dump() << "\n";
    ++revoked;
  }
  if (revoked == 0) {
    std::cerr << "tollgate: no active credential matches\n";
    return 1;
  }
  return 0;
}

int RunList(const AdminTarget& t, const std::string& kind, const std::string& org) {
  Json reply;
  Status s = ListCredentials(t, kind, org, &reply);
  if (!s.ok()) return Fail(s);
  for (const Json& c : reply["credentials"]) std::cout << c.dump() << "\n";
  return 0;
}

// Prints the tollgate-auth header for a request read from stdin (or
// --value): its org, agent and request_id are the message's own.
int RunSign(const AgentFlags& f, const std::string& value_flag) {
  std::string value = value_flag;
  // The exact bytes, trailing newline included: kcat sends a file argument
  // whole, and value_sha256 must match what the broker carries.
  if (value.empty()) value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  Json req;
  // The parser's own words (a number out of range says which range holds).
  if (Status p = ParseJson(value, &req); !p.ok()) {
    return Fail(Status::Error(p.code(), "the request is not valid JSON: " + p.message()));
  }
  if (!req.is_object()) {
    return Fail(Status::Error("E_INVALID_REQUEST",
                              std::string("the request must be a JSON object, not ") + req.type_name()));
  }
  std::string org = f.org, agent = f.agent, request_id;
  for (auto [key, into] : {std::pair{"org_id", &org}, {"agent_id", &agent}, {"request_id", &request_id}}) {
    auto it = req.find(key);
    if (it == req.end()) continue;
    if (!it->is_string()) {
      return Fail(Status::Error("E_INVALID_REQUEST",
                                std::string("/") + key + ": expected a string, got " + it->type_name()));
    }
    *into = it->get<std::string>();
  }
  if (agent.empty() && f.out.empty()) {
    return Fail(Status::Error("E_INVALID_REQUEST",
                              "the request has no agent_id, so there is no default key file: give --key"));
  }
  JwtSigner signer;
  Status s = LoadAgentSigner(f.out.empty() ? DefaultAgentKeyPath(f.data, org, agent) : f.out, &signer);
  if (!s.ok()) return Fail(s);
  std::cout << SignRequest(signer, org, agent, request_id, value, NowMicros() / 1'000'000) << std::endl;
  return 0;
}

}  // namespace

std::string DefaultAgentKeyPath(const std::string& data, const std::string& org, const std::string& agent) {
  return data + "/keys/" + org + "/" + agent + ".pem";
}

Status LoadAgentSigner(const std::string& path, JwtSigner* out) {
  std::string pem;
  Status s = ReadPrivateKeyFile(path, &pem);
  return s.ok() ? SignerForKey(pem, out) : s;
}

Status EnsureAgentKey(const std::string& data, const std::string& org, const std::string& agent,
                      const std::string& path, bool* registered) {
  *registered = false;
  // The data directory, not the key's (which may not exist yet): every
  // first use of the deployment's agents queues here, for one HTTP call each.
  const int fd = open(data.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::Error(errc::kKeyFile, "cannot open data directory " + data + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }  // releases the flock
  } closer{fd};
  int r;
  do r = flock(fd, LOCK_EX);
  while (r != 0 && errno == EINTR);
  if (r != 0)
    return Status::Error(errc::kKeyFile, "cannot lock data directory " + data + ": " + std::strerror(errno));
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return Status::Ok();  // made and registered while we waited
  if (ec) return Status::Error(errc::kKeyFile, "cannot look for " + path + ": " + ec.message());
  Json reply;
  Status s = RegisterAgentKey({data, ""}, org, agent, path, &reply);
  *registered = s.ok();
  return s;
}

Status RegisterAgentKey(const AdminTarget& t, const std::string& org, const std::string& agent,
                        const std::string& path, Json* reply) {
  std::string pem, pub;
  Status s = GenerateEd25519(&pem, &pub);
  if (s.ok()) s = WritePrivateKeyFile(path, pem);
  if (!s.ok()) return s;
  s = AddCredential(t, {{"kind", "agent_key"}, {"org_id", org}, {"identity", agent}, {"public_key", pub}},
                    reply);
  if (!s.ok()) {
    std::filesystem::remove(path);  // an unregistered key is no use to anyone
    return s;
  }
  (*reply)["private_key_file"] = path;
  return Status::Ok();
}

void AddCredentialCommands(CLI::App& app, int* exit_code) {
  auto* agents =
      app.add_subcommand("agents", "register, list and revoke agents' signing keys; sign a request");
  agents->require_subcommand(1);
  auto common = [](CLI::App* c, AgentFlags* f) {
    c->add_option("--data", f->data, "data directory of `tollgate up`")->capture_default_str();
    c->add_option("--token-file", f->token_file,
                  "an admin's token (default $TOLLGATE_TOKEN, else DATA/admin.token)");
  };
  auto add = std::make_shared<AgentFlags>();
  auto* a =
      agents->add_subcommand("add", "make a key pair; write the private key (0600); register the public key");
  common(a, add.get());
  a->add_option("--org", add->org, "the agent's org")->required();
  a->add_option("--agent", add->agent, "the agent id")->required();
  a->add_option("--out", add->out, "private key file (default DATA/keys/ORG/AGENT.pem)");
  a->callback([add, exit_code] { *exit_code = RunAgentsAdd(*add); });

  auto ls = std::make_shared<AgentFlags>();
  auto* l = agents->add_subcommand("list", "registered agent keys as JSON lines");
  common(l, ls.get());
  ls->org.clear();
  l->add_option("--org", ls->org, "only this org");
  l->callback([ls, exit_code] { *exit_code = RunList({ls->data, ls->token_file}, "agent_key", ls->org); });

  auto rv = std::make_shared<AgentFlags>();
  auto* r = agents->add_subcommand("revoke", "revoke an agent's keys (every active one, or --key-id)");
  common(r, rv.get());
  r->add_option("--org", rv->org, "the agent's org")->required();
  r->add_option("--agent", rv->agent, "the agent id")->required();
  r->add_option("--key-id", rv->key_id, "only this key");
  r->add_option("--reason", rv->reason, "for the record");
  r->callback([rv, exit_code] {
    *exit_code =
        RunRevoke({rv->data, rv->token_file}, "agent_key", rv->org, rv->agent, rv->key_id, rv->reason);
  });

  auto sg = std::make_shared<AgentFlags>();
  auto value = std::make_shared<std::string>();
  auto* s = agents->add_subcommand(
      "sign", "print the tollgate-auth header for a request: the exact bytes sent (stdin or --value)");
  s->add_option("--data", sg->data, "data directory (for the default key path)")->capture_default_str();
  s->add_option("--key", sg->out, "the agent's private key (default DATA/keys/ORG/AGENT.pem of the request)");
  s->add_option("--value", *value, "the exact message value (default: stdin)");
  s->callback([sg, value, exit_code] { *exit_code = RunSign(*sg, *value); });

  struct TokenFlags {
    std::string data = kDefaultDataDir, token_file, identity, org, key_id, reason;
    std::vector<std::string> roles;
  };
  auto* tokens = app.add_subcommand("tokens", "bearer tokens of the HTTP API (and the CLI's approvals)");
  tokens->require_subcommand(1);
  auto tf = std::make_shared<TokenFlags>();
  auto* tadd = tokens->add_subcommand("add", "create a token; prints it once (the log keeps only its hash)");
  tadd->add_option("--data", tf->data, "data directory")->capture_default_str();
  tadd->add_option("--token-file", tf->token_file,
                   "an admin's token (default $TOLLGATE_TOKEN, else DATA/admin.token)");
  tadd->add_option(
          "--identity", tf->identity,
          "who the token is, in its org (orgs may share a name; none may take a deployment-wide one)")
      ->required();
  tadd->add_option("--org", tf->org, "its org (\"*\": deployment-wide, for a deployment admin)")->required();
  tadd->add_option("--role", tf->roles,
                   "agent, approver, auditor, operator (GET /metrics) or admin (repeatable)")
      ->required();
  tadd->callback([tf, exit_code] {
    Json reply;
    Status s = AddCredential(
        {tf->data, tf->token_file},
        {{"kind", "token"}, {"identity", tf->identity}, {"org_id", tf->org}, {"roles", tf->roles}}, &reply);
    if (!s.ok()) {
      *exit_code = Fail(s);
      return;
    }
    std::cout << reply.value("token", "") << std::endl;
    std::cerr << "key_id " << reply["credential"].value("key_id", "")
              << " (for `tokens revoke`); in force now\n";
    *exit_code = 0;
  });
  auto tl = std::make_shared<TokenFlags>();
  auto* tlist = tokens->add_subcommand("list", "tokens as JSON lines (never the token)");
  tlist->add_option("--data", tl->data, "data directory")->capture_default_str();
  tlist->add_option("--org", tl->org, "only this org");
  tlist->callback([tl, exit_code] { *exit_code = RunList({tl->data, tl->token_file}, "token", tl->org); });
  auto tr = std::make_shared<TokenFlags>();
  auto* trev = tokens->add_subcommand("revoke", "revoke a token by key_id (effective at once, logged)");
  trev->add_option("key_id", tr->key_id, "the token's key_id (`tokens list`)")->required();
  trev->add_option("--data", tr->data, "data directory")->capture_default_str();
  trev->add_option("--token-file", tr->token_file,
                   "an admin's token (default $TOLLGATE_TOKEN, else DATA/admin.token)");
  trev->add_option("--reason", tr->reason, "for the record");
  trev->callback([tr, exit_code] {
    *exit_code = RunRevoke({tr->data, tr->token_file}, "token", "", "", tr->key_id, tr->reason);
  });
}

}  // namespace tollgate::cli
