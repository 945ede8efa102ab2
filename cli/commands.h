// Subcommand registration for the `tollgate` binary. Each Add*Commands
// attaches its subcommands to the app; the callback it installs sets
// *exit_code. Registered in one place: cli/main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "audit/log_store.h"
#include "core/jwt.h"

namespace tollgate::cli {

inline constexpr const char* kDefaultDataDir = "tollgate-data";

void AddUpCommand(CLI::App& app, int* exit_code);     // up and broker
void AddStageCommand(CLI::App& app, int* exit_code);  // stage NAME (distributed)
void AddSubmitCommand(CLI::App& app, int* exit_code);
void AddMcpCommand(CLI::App& app, int* exit_code);
void AddToolsCommands(CLI::App& app, int* exit_code);  // tools list  // mcp (the stdio MCP server)
void AddAuditCommands(CLI::App& app, int* exit_code);
void AddBenchCommands(CLI::App& app, int* exit_code);
void AddReplayCommands(CLI::App& app, int* exit_code);
void AddPolicyCommands(CLI::App& app, int* exit_code);      // policy check|explain
void AddApprovalsCommands(CLI::App& app, int* exit_code);   // approvals list|approve|deny
void AddRulesCommands(CLI::App& app, int* exit_code);       // rules list|revoke
void AddCredentialCommands(CLI::App& app, int* exit_code);  // agents and tokens

// The event log of `data`: DATA/log when `data` is a data directory (what
// `up --data` took), else `data` itself (the log directory). Every command
// that reads the log accepts either.
std::string LogDirOf(const std::string& data);
// Opens that log read-only (a secondary instance, caught up); a missing log
// says which two places were looked at.
Status OpenLogReader(const std::string& data, std::unique_ptr<LogStore>* store);

// Where `agents add` puts an agent's private key by default, and where
// `submit` and `agents sign` look for it: DATA/keys/ORG/AGENT.pem.
std::string DefaultAgentKeyPath(const std::string& data, const std::string& org, const std::string& agent);
// A signer for an agent's private key file (kid = its key_id).
Status LoadAgentSigner(const std::string& path, JwtSigner* out);
struct AdminTarget;
// Makes a key pair for (org, agent), writes the private key to `path`
// (0600) and registers the public key (cli/admin_client.h); on failure no
// key file is left. `agents add` and `submit`'s first use.
Status RegisterAgentKey(const AdminTarget& t, const std::string& org, const std::string& agent,
                        const std::string& path, Json* reply);

// The key at `path` of (org, agent), registered through `data` unless
// that file exists: made under an exclusive flock on the data directory, so
// concurrent first uses of a new agent make and register one key and the
// others read it. *registered: this call made it. E_KEY_FILE when `data`
// cannot be opened or locked; RegisterAgentKey's errors.
Status EnsureAgentKey(const std::string& data, const std::string& org, const std::string& agent,
                      const std::string& path, bool* registered);

// The signer `submit` and `mcp` sign an agent's requests with: `key_flag`
// when given, else the data dir's key for (org, agent), registered first
// when a local operator has none (a line on stderr says so).
Status AgentSignerFor(const std::string& data, const std::string& org, const std::string& agent,
                      const std::string& key_flag, JwtSigner* out);

// Parses an RFC 3339 time or fails with a CLI11 validation error naming `flag`.
int64_t ParseTimeFlag(const std::string& flag, const std::string& value);

}  // namespace tollgate::cli
