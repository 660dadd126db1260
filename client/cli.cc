#include "client/cli.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/job_commands.h"
#include "client/query_commands.h"

namespace anisoscope::client {
namespace {

std::vector<Command> AllCommands() {
  std::vector<Command> commands = JobCommands();
  for (Command& command : QueryCommands()) commands.push_back(std::move(command));
  // --server is also accepted after the command name.
  for (Command& command : commands) {
    command.spec.flags.push_back(StringFlag(
        "server", "HOST:PORT", "the server (default: $ANISOSCOPE_SERVER, else 127.0.0.1:50051)"));
  }
  return commands;
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
  absl::StrAppend(
      &text,
      "\n"
      "global flags:\n"
      "  --server HOST:PORT  the server (default: $ANISOSCOPE_SERVER, else ",
      kDefaultServer,
      ")\n"
      "  -h, --help          show this help ('anisoscope COMMAND --help': a command's flags)\n"
      "\n"
      "exit status: 0 success, 1 server error or failed job, 2 usage error\n");
  return text;
}

int RunCli(const std::vector<std::string>& args, const CliEnvironment& env) {
  std::string server = env.env_server.empty() ? kDefaultServer : env.env_server;
  CommandContext top(env, server);
  size_t i = 0;
  // Global flags, up to the command name.
  for (; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--help" || word == "-h") {
      env.out->write(TopLevelUsage().data(), TopLevelUsage().size());
      return kExitOk;
    }
    if (word == "--server") {
      if (i + 1 == args.size() || args[i + 1].empty() || args[i + 1][0] == '-') {
        return top.UsageError("--server requires a value (HOST:PORT)");
      }
      server = args[++i];
    } else if (word.rfind("--server=", 0) == 0) {
      server = word.substr(9);
      if (server.empty()) return top.UsageError("--server: value is empty");
    } else if (!word.empty() && word[0] == '-') {
      return top.UsageError(absl::StrCat("unknown flag ", word, " (see 'anisoscope --help')"));
    } else {
      break;
    }
  }
  if (i == args.size()) {
    return top.UsageError("missing COMMAND (see 'anisoscope --help')");
  }
  std::string name = args[i++];
  std::vector<std::string> rest(args.begin() + i, args.end());
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
    if (parsed->Has("server")) server = parsed->GetString("server");
    return command.run(*parsed, CommandContext(env, server));
  }
  return top.UsageError(absl::StrCat("unknown command '", name, "' (see 'anisoscope --help')"));
}

}  // namespace anisoscope::client
