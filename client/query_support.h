// What the query commands share (query_commands.cc, analysis_commands.cc): the step-range
// flags, the check for required flags and the call of one QueryService method.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "client/command_context.h"
#include "client/flags.h"

namespace anisoscope::client {

// --run NAME and --probe ID, as every query command reads them.
inline FlagSpec RunFlag() { return StringFlag("run", "NAME", "the run (see 'runs')"); }
inline FlagSpec ProbeFlag() {
  return StringFlag("probe", "ID", "the probe (default: the run's only one)");
}

// --from-step A, --to-step B.
inline std::vector<FlagSpec> StepRangeFlags() {
  return {IntFlag("from-step", "A", "only steps >= A", 0),
          IntFlag("to-step", "B", "only steps <= B", 0)};
}

// Applies --from-step / --to-step; their order is the server's check (ValidateStepRange in
// server/queries/query_checks.h), whose INVALID_ARGUMENT is shown.
template <typename Request>
void SetStepRange(const ParsedArgs& args, Request* request) {
  if (args.Has("from-step")) request->set_from_step(args.GetInt("from-step"));
  if (args.Has("to-step")) request->set_to_step(args.GetInt("to-step"));
}

// The first of `required` that `args` lacks, as the usage error "COMMAND: --FLAG is
// required"; kExitOk when none is missing.
inline int RequireFlags(const ParsedArgs& args, const CommandContext& context, const char* command,
                        std::initializer_list<const char*> required) {
  for (const char* flag : required) {
    if (!args.Has(flag)) {
      return context.UsageError(absl::StrCat(command, ": --", flag, " is required"));
    }
  }
  return kExitOk;
}

// Calls QueryService's `method`: kExitOk with `response` filled, or the error's exit code
// after printing it.
template <typename Request, typename Response>
int CallQueryService(const CommandContext& context,
                     grpc::Status (v1::QueryService::Stub::*method)(grpc::ClientContext*,
                                                                    const Request&, Response*),
                     const Request& request, Response* response) {
  auto channel = context.Connect();
  if (!channel.ok()) return context.Error(channel.status().message());
  grpc::ClientContext rpc;
  context.Prepare(&rpc);
  const std::unique_ptr<v1::QueryService::Stub> stub = v1::QueryService::NewStub(*channel);
  grpc::Status status = (stub.get()->*method)(&rpc, request, response);
  if (!status.ok()) return context.RpcError(status);
  return kExitOk;
}

}  // namespace anisoscope::client
