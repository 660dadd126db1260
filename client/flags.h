// The flags of each CLI command, declared once: one CommandSpec per command describes its
// flags and positional arguments; ParseArgs parses with CLI11 from it and CommandUsage writes
// the `--help` text from it, so the help cannot drift from what is accepted.
//
// Accepted forms: `--name value`, `--name=value`, booleans as `--name`, repeatable flags
// given several times, positional arguments anywhere, and `--` to end the flags.
// Every error names the flag (or positional argument) concerned. Pure functions; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::client {

enum class FlagKind {
  kString,    // --name value
  kInt,       // --name N, checked to be an integer in [min_value, max_value]
  kBool,      // --name (takes no value)
  kRepeated,  // --name value, may be given several times
};

struct FlagSpec {
  std::string name;  // without the leading "--"
  FlagKind kind = FlagKind::kString;
  std::string value_name;            // shown in help, e.g. "DIR"; defaults to "VALUE" / "N"
  std::string help;                  // one line
  std::vector<std::string> choices;  // when non-empty, the only accepted values
  int64_t min_value = INT64_MIN;     // for kInt
  int64_t max_value = INT64_MAX;     // for kInt
};

struct PositionalSpec {
  std::string name;  // e.g. "JOB"
  std::string help;
};

struct CommandSpec {
  std::string name;      // e.g. "submit"
  std::string synopsis;  // the usage line after "anisoscope [--server HOST:PORT] NAME "
  std::string summary;   // one line, shown in the top-level help
  std::vector<PositionalSpec> positionals;  // all required, in order
  std::vector<FlagSpec> flags;
  std::string details;  // free text appended to the help (may be empty)
  // The top level (name empty): parsing stops at the first positional argument, COMMAND;
  // it and every word after it are positionals(), for the command to parse.
  bool command_follows = false;
};

// Factories for the flag kinds, so that specs read as one line per flag.
FlagSpec StringFlag(std::string name, std::string value_name, std::string help);
FlagSpec IntFlag(std::string name, std::string value_name, std::string help,
                 int64_t min_value = INT64_MIN, int64_t max_value = INT64_MAX);
FlagSpec BoolFlag(std::string name, std::string help);
FlagSpec RepeatedFlag(std::string name, std::string value_name, std::string help);
FlagSpec ChoiceFlag(std::string name, std::vector<std::string> choices, std::string help);

// The outcome of a successful parse. Values are stored as given (ints already checked).
class ParsedArgs {
 public:
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value of a flag, or `fallback` when absent.
  std::string GetString(const std::string& name, const std::string& fallback = "") const;
  // The value of a kInt flag (validated at parse time), or `fallback` when absent.
  int64_t GetInt(const std::string& name, int64_t fallback = 0) const;
  // Every value of a flag, in the order given.
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  bool help() const { return help_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec&, const std::vector<std::string>&);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

// Parses `args` (the words after the command name) against `spec`. `--help` / `-h`
// anywhere before `--` sets help() and skips every other check. Errors are
// InvalidArgument with a one-line message naming the flag, e.g.
// "--samples: expected an integer, got 'ten'".
absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec, const std::vector<std::string>& args);

// Parses a decimal int64 (no sign other than a leading '-', no trailing junk).
bool ParseInt64(const std::string& text, int64_t* out);

// The `anisoscope COMMAND --help` text generated from `spec` (ends with a newline).
std::string CommandUsage(const CommandSpec& spec);

}  // namespace anisoscope::client
