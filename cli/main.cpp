// tollgate: one binary, one subcommand per job (docs/architecture.md, "CLI").
#include <iostream>

#include "cli/commands.h"
#include "core/event.h"

namespace tollgate::cli {

int64_t ParseTimeFlag(const std::string& flag, const std::string& value) {
  int64_t t;
  if (!ParseTime(value, &t)) {
    throw CLI::ValidationError(flag, "'" + value + "' is not an RFC 3339 time (e.g. 2026-11-22T10:00:00Z)");
  }
  return t;
}

}  // namespace tollgate::cli

int main(int argc, char** argv) {
  CLI::App app{"tollgate: an event-sourced gate for AI-agent tool calls"};
  app.require_subcommand(1);
  int exit_code = 0;
  tollgate::cli::AddUpCommand(app, &exit_code);
  tollgate::cli::AddStageCommand(app, &exit_code);
  tollgate::cli::AddSubmitCommand(app, &exit_code);
  tollgate::cli::AddMcpCommand(app, &exit_code);
  tollgate::cli::AddToolsCommands(app, &exit_code);
  tollgate::cli::AddAuditCommands(app, &exit_code);
  tollgate::cli::AddBenchCommands(app, &exit_code);
  tollgate::cli::AddReplayCommands(app, &exit_code);
  tollgate::cli::AddPolicyCommands(app, &exit_code);
  tollgate::cli::AddApprovalsCommands(app, &exit_code);
  tollgate::cli::AddRulesCommands(app, &exit_code);
  tollgate::cli::AddCredentialCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
