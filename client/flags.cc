#include "client/flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace anisoscope::client {
namespace {

std::string ValueName(const FlagSpec& flag) {
  if (!flag.choices.empty()) return absl::StrJoin(flag.choices, "|");
  if (!flag.value_name.empty()) return flag.value_name;
  return flag.kind == FlagKind::kInt ? "N" : "VALUE";
}

// True for words that look like a flag rather than a value ("-5" is a value).
bool LooksLikeFlag(const std::string& word) {
  if (word.size() < 2 || word[0] != '-') return false;
  int64_t unused;
  return !ParseInt64(word, &unused);
}

absl::Status CheckValue(const FlagSpec& flag, const std::string& value) {
  if (!flag.choices.empty() &&
      std::find(flag.choices.begin(), flag.choices.end(), value) == flag.choices.end()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag.name, ": expected one of ",
                                                   absl::StrJoin(flag.choices, ", "), "; got '",
                                                   value, "'"));
  }
  if (flag.kind == FlagKind::kInt) {
    int64_t number;
    if (!ParseInt64(value, &number)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag.name, ": expected an integer, got '", value, "'"));
    }
    if (number < flag.min_value) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag.name, ": must be at least ", flag.min_value, ", got ", number));
    }
    if (number > flag.max_value) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag.name, ": must be at most ", flag.max_value, ", got ", number));
    }
  }
  if (value.empty() && flag.kind != FlagKind::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag.name, ": value is empty"));
  }
  return absl::OkStatus();
}

}  // namespace

FlagSpec StringFlag(std::string name, std::string value_name, std::string help) {
  FlagSpec flag;
  flag.name = std::move(name);
  flag.value_name = std::move(value_name);
  flag.help = std::move(help);
  return flag;
}

FlagSpec IntFlag(std::string name, std::string value_name, std::string help, int64_t min_value,
                 int64_t max_value) {
  FlagSpec flag = StringFlag(std::move(name), std::move(value_name), std::move(help));
  flag.kind = FlagKind::kInt;
  flag.min_value = min_value;
  flag.max_value = max_value;
  return flag;
}

FlagSpec BoolFlag(std::string name, std::string help) {
  FlagSpec flag = StringFlag(std::move(name), "", std::move(help));
  flag.kind = FlagKind::kBool;
  return flag;
}

FlagSpec RepeatedFlag(std::string name, std::string value_name, std::string help) {
  FlagSpec flag = StringFlag(std::move(name), std::move(value_name), std::move(help));
  flag.kind = FlagKind::kRepeated;
  return flag;
}

FlagSpec ChoiceFlag(std::string name, std::vector<std::string> choices, std::string help) {
  FlagSpec flag = StringFlag(std::move(name), "", std::move(help));
  flag.choices = std::move(choices);
  return flag;
}

bool ParseInt64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  size_t digits_from = text[0] == '-' ? 1 : 0;
  if (digits_from == text.size()) return false;
  for (size_t i = digits_from; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return false;
  *out = static_cast<int64_t>(value);
  return true;
}

std::string ParsedArgs::GetString(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

int64_t ParsedArgs::GetInt(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int64_t value = fallback;
  ParseInt64(it->second.back(), &value);
  return value;
}

std::vector<std::string> ParsedArgs::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec,
                                     const std::vector<std::string>& args) {
  ParsedArgs parsed;
  for (const std::string& word : args) {
    if (word == "--" || (spec.command_follows && !LooksLikeFlag(word))) break;
    if (word == "--help" || word == "-h") {
      parsed.help_ = true;
      return parsed;
    }
  }
  const std::string see_help = spec.name.empty()
                                   ? " (see 'anisoscope --help')"
                                   : absl::StrCat(" (see 'anisoscope ", spec.name, " --help')");
  const std::string for_command = spec.name.empty() ? "" : absl::StrCat(" for '", spec.name, "'");
  // What CLI11 would take silently or refuse in its own words: a flag's value that is
  // missing or empty, a value given to a boolean flag.
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (spec.command_follows && !LooksLikeFlag(args[i])) break;
    for (const FlagSpec& flag : spec.flags) {
      const std::string name = absl::StrCat("--", flag.name);
      if (flag.kind == FlagKind::kBool) {
        if (absl::StartsWith(args[i], name + "=")) {
          return absl::InvalidArgumentError(absl::StrCat(name, " takes no value"));
        }
        continue;
      }
      if (args[i] == name + "=") return absl::InvalidArgumentError(name + ": value is empty");
      if (args[i] == name && (i + 1 == args.size() || LooksLikeFlag(args[i + 1]))) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " requires a value (", ValueName(flag), ")"));
      }
    }
  }
  CLI::App app(spec.summary, spec.name);
  app.set_help_flag();  // --help is handled above, before any other check
  app.allow_extras();   // named below, the way this CLI names them
  app.positionals_at_end(false);
  // CLI11 fills these; empty vectors for flags not given.
  std::map<std::string, std::vector<std::string>> given;
  // The first value our checks refused, with our message (CLI11's wording is never read).
  absl::Status invalid;
  for (const FlagSpec& flag : spec.flags) {
    std::vector<std::string>& slot = given[flag.name];
    if (flag.kind == FlagKind::kBool) {
      app.add_flag_function(
             "--" + flag.name, [&slot](int64_t) { slot = {"true"}; }, flag.help)
          ->disable_flag_override();
      continue;
    }
    app.add_option("--" + flag.name, slot, flag.help)
        ->type_name(ValueName(flag))
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(flag.kind == FlagKind::kRepeated ? CLI::MultiOptionPolicy::TakeAll
                                                               : CLI::MultiOptionPolicy::TakeLast)
        ->check(CLI::Validator(
            [&flag, &invalid](const std::string& value) {
              const absl::Status status = CheckValue(flag, value);
              if (status.ok()) return std::string();
              if (invalid.ok()) invalid = status;
              return std::string(status.message());
            },
            ""));
  }
  if (spec.command_follows) {
    app.prefix_command();
  } else {
    app.add_option("positionals", parsed.positionals_)->expected(0, -1);
  }
  std::vector<const char*> argv = {spec.name.c_str()};
  for (const std::string& word : args) argv.push_back(word.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    // Our own checks name the flag ("--samples: expected an integer ..."). Missing and empty
    // values and values of boolean flags were refused above; anything else CLI11 refuses is
    // named by its kind, never by matching its wording.
    if (!invalid.ok()) return invalid;
    return absl::InvalidArgumentError(absl::StrCat(spec.name, spec.name.empty() ? "" : ": ",
                                                   "cannot read the arguments (", error.get_name(),
                                                   ")", see_help));
  }
  bool flags_ended = false;
  for (const std::string& extra : app.remaining()) {
    if (!flags_ended && extra == "--") {
      flags_ended = true;
      continue;
    }
    if (!flags_ended && LooksLikeFlag(extra)) {
      const std::string name = extra.substr(0, extra.find('='));
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", name, for_command, see_help));
    }
    parsed.positionals_.push_back(extra);
    if (spec.command_follows) flags_ended = true;  // COMMAND's own flags are its business
  }
  for (auto& [name, values] : given) {
    if (!values.empty()) parsed.values_[name] = std::move(values);
  }
  if (spec.command_follows) return parsed;
  if (parsed.positionals_.size() < spec.positionals.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.name, ": missing ", spec.positionals[parsed.positionals_.size()].name, see_help));
  }
  if (parsed.positionals_.size() > spec.positionals.size()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name, ": unexpected argument '",
                                                   parsed.positionals_[spec.positionals.size()],
                                                   "'", see_help));
  }
  return parsed;
}

std::string CommandUsage(const CommandSpec& spec) {
  std::string text = absl::StrCat("usage: anisoscope [--server HOST:PORT] ", spec.name,
                                  spec.synopsis.empty() ? "" : " ",
                                  absl::StrReplaceAll(spec.synopsis, {{"\n", "\n    "}}), "\n\n",
                                  spec.summary, "\n");
  std::vector<std::pair<std::string, std::string>> rows;
  for (const PositionalSpec& positional : spec.positionals) {
    rows.emplace_back(positional.name, positional.help);
  }
  for (const FlagSpec& flag : spec.flags) {
    std::string left = absl::StrCat("--", flag.name);
    if (flag.kind != FlagKind::kBool) absl::StrAppend(&left, " ", ValueName(flag));
    rows.emplace_back(std::move(left), flag.help);
  }
  rows.emplace_back("-h, --help", "show this help and exit");
  // The help column starts after the widest flag of at most kMaxFlagWidth columns; a wider
  // one (a choice of many values) has its help on the next line.
  constexpr size_t kMaxFlagWidth = 28;
  size_t width = 0;
  for (const auto& row : rows) {
    if (row.first.size() <= kMaxFlagWidth) width = std::max(width, row.first.size());
  }
  absl::StrAppend(&text, "\narguments:\n");
  const std::string indent(width + 4, ' ');
  for (const auto& [left, help] : rows) {
    const std::string gap =
        left.size() <= width ? std::string(width - left.size() + 2, ' ') : "\n" + indent;
    absl::StrAppend(&text, "  ", left, gap, absl::StrReplaceAll(help, {{"\n", "\n" + indent}}),
                    "\n");
  }
  if (!spec.details.empty()) absl::StrAppend(&text, "\n", spec.details);
  return text;
}

}  // namespace anisoscope::client
