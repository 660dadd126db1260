#include "client/cli.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/alarm_commands.h"
#include "client/analysis_commands.h"
#include "client/audit_commands.h"
#include "client/job_commands.h"
#include "client/query_commands.h"
#include "common/version.h"

namespace anisoscope::client {
namespace {

// The flags that say how to connect: accepted before the command name and after it.
struct GlobalFlag {
  const char* name;
  const char* value_name;
  const char* help;
  std::string Connection::*field;
};

const std::vector<GlobalFlag>& GlobalFlags() {
  static const auto* flags = new std::vector<GlobalFlag>{
      {"server", "HOST:PORT", "the server (default: $ANISOSCOPE_SERVER, else 127.0.0.1:50051)",
       &Connection::server},
      {"token", "TOKEN", "bearer token (default: $ANISOSCOPE_TOKEN, which keeps it out of ps)",
       &Connection::token},
      {"tls-ca", "FILE",
       "PEM CA of the server's certificate: connect over TLS (default: $ANISOSCOPE_TLS_CA)",
       &Connection::tls_ca},
      {"namespace", "NAME",
       "act in this namespace; admins only (default: $ANISOSCOPE_NAMESPACE, else the token's)",
       &Connection::ns},
  };
  return *flags;
}

std::vector<Command> AllCommands() {
  std::vector<Command> commands = JobCommands();
  for (Command& command : AuditCommands()) commands.push_back(std::move(command));
  for (Command& command : QueryCommands()) commands.push_back(std::move(command));
  for (Command& command : AnalysisCommands()) commands.push_back(std::move(command));
  for (Command& command : AlarmCommands()) commands.push_back(std::move(command));
  for (Command& command : commands) {
    for (const GlobalFlag& flag : GlobalFlags()) {
      command.spec.flags.push_back(StringFlag(flag.name, flag.value_name, flag.help));
    }
  }
  return commands;
}

// The top level of the command line: the global flags, up to COMMAND.
CommandSpec TopLevelSpec() {
  CommandSpec spec;
  spec.command_follows = true;
  for (const GlobalFlag& flag : GlobalFlags()) {
    spec.flags.push_back(StringFlag(flag.name, flag.value_name, flag.help));
  }
  spec.flags.push_back(BoolFlag("version", "print the version, then exit"));
  return spec;
}

// Sets `connection`'s fields from the global flags in `args`.
void TakeGlobalFlags(const ParsedArgs& args, Connection* connection) {
  for (const GlobalFlag& flag : GlobalFlags()) {
    if (args.Has(flag.name)) connection->*flag.field = args.GetString(flag.name);
  }
}

}  // namespace

std::string TopLevelUsage() {
  std::string text =
      "usage: anisoscope [--server HOST:PORT] COMMAND [flags]\n"
      "\n"
      "Client of the anisoscope service: submits jobs that analyze a run's checkpoints\n"
      "with a probe, and queries the per-head query/key statistics they store.\n"
      "\n"
      "commands:\n";
  const std::vector<Command> commands = AllCommands();
  size_t width = 0;
  for (const Command& command : commands) width = std::max(width, command.spec.name.size());
  for (const Command& command : commands) {
    absl::StrAppend(&text, "  ", command.spec.name,
                    std::string(width - command.spec.name.size() + 2, ' '), command.spec.summary,
                    "\n");
  }
  absl::StrAppend(&text, "\nglobal flags (also accepted after COMMAND):\n");
  for (const GlobalFlag& flag : GlobalFlags()) {
    absl::StrAppend(&text, "  --", flag.name, " ", flag.value_name, "\n      ", flag.help, "\n");
  }
  absl::StrAppend(
      &text,
      "  -h, --help\n      show this help ('anisoscope COMMAND --help': a command's flags)\n"
      "  --version\n      print the version, then exit\n"
      "\n"
      "exit status: 0 success; 2 the request is wrong (a usage error, or one the server\n"
      "refuses as INVALID_ARGUMENT or OUT_OF_RANGE, e.g. a layer the run does not have);\n"
      "1 it could not be carried out (server unreachable, NOT_FOUND, PERMISSION_DENIED,\n"
      "UNAVAILABLE, ..., or a job that failed); 130 Ctrl-C while waiting on a job (the\n"
      "job goes on)\n");
  return text;
}

int RunCli(const std::vector<std::string>& args, const CliEnvironment& env) {
  Connection connection = env.from_env;
  CommandContext top(env, connection);
  absl::StatusOr<ParsedArgs> global = ParseArgs(TopLevelSpec(), args);
  if (!global.ok()) return top.UsageError(global.status().message());
  if (global->help()) {
    *env.out << TopLevelUsage();
    return kExitOk;
  }
  if (global->Has("version")) {
    *env.out << VersionLine("anisoscope") << "\n";
    return kExitOk;
  }
  TakeGlobalFlags(*global, &connection);
  std::vector<std::string> rest = global->positionals();
  if (rest.empty()) return top.UsageError("missing COMMAND (see 'anisoscope --help')");
  std::string name = rest.front();
  rest.erase(rest.begin());
  if (name == "help") {  // `anisoscope help [COMMAND]`
    if (rest.empty()) {
      *env.out << TopLevelUsage();
      return kExitOk;
    }
    name = rest[0];
    rest = {"--help"};
  }
  for (const Command& command : AllCommands()) {
    if (command.spec.name != name) continue;
    absl::StatusOr<ParsedArgs> parsed = ParseArgs(command.spec, rest);
    if (!parsed.ok()) return top.UsageError(parsed.status().message());
    if (parsed->help()) {
      *env.out << CommandUsage(command.spec);
      return kExitOk;
    }
    TakeGlobalFlags(*parsed, &connection);
    return command.run(*parsed, CommandContext(env, connection));
  }
  return top.UsageError(absl::StrCat("unknown command '", name, "' (see 'anisoscope --help')"));
}

}  // namespace anisoscope::client
