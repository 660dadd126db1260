// The flags and checks the query commands share (query_commands.cc, analysis_commands.cc).
#pragma once

#include <vector>

#include "absl/strings/str_cat.h"
#include "client/command_context.h"
#include "client/flags.h"

namespace anisoscope::client {

// --from-step A, --to-step B.
inline std::vector<FlagSpec> StepRangeFlags() {
  return {IntFlag("from-step", "A", "only steps >= A", 0),
          IntFlag("to-step", "B", "only steps <= B", 0)};
}

// Applies --from-step / --to-step, checking their order; false after a usage error.
template <typename Request>
bool SetStepRange(const ParsedArgs& args, const CommandContext& context, Request* request) {
  if (args.Has("from-step")) request->set_from_step(args.GetInt("from-step"));
  if (args.Has("to-step")) request->set_to_step(args.GetInt("to-step"));
  if (args.Has("from-step") && args.Has("to-step") &&
      args.GetInt("from-step") > args.GetInt("to-step")) {
    context.UsageError(absl::StrCat("--from-step ", args.GetInt("from-step"),
                                    " is after --to-step ", args.GetInt("to-step")));
    return false;
  }
  return true;
}

}  // namespace anisoscope::client
