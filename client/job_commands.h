// The job commands of the CLI: submit, follow, status, jobs, cancel, watch (JobService).
// Each command blocks on its RPCs; output goes to the context's streams.
#pragma once

#include <grpcpp/channel.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "client/command_context.h"
#include "client/flags.h"

namespace anisoscope::client {

// submit, follow, status, jobs, cancel, watch, in the order the help lists them.
std::vector<Command> JobCommands();

// Builds the request of `submit` (or, with `follow`, of `follow`) from its parsed flags;
// relative paths are made absolute against `cwd`. Errors (InvalidArgument, naming the
// flag) are usage errors.
absl::StatusOr<v1::SubmitJobRequest> BuildSubmitRequest(const ParsedArgs& args,
                                                        const std::string& cwd,
                                                        bool follow = false);

// `path` made absolute against `cwd` (`.` components dropped; `..` kept, since the
// server resolves links).
std::string AbsolutePath(const std::string& path, const std::string& cwd);

// Follows job `id` over WatchJob until it ends, writing progress to err() and a summary
// line to out(). Returns 0 when every checkpoint was done or skipped, 1 otherwise
// (failed or cancelled job, RPC error, stream cut); the job as it ended in `final_job` when
// given. Blocks until the job ends. With `leave_on_interrupt`, Ctrl-C (or SIGTERM) ends the
// watch instead, not the job: "job N continues: `anisoscope watch N`, `anisoscope cancel N`"
// on err() and kExitInterrupted (one InterruptGuard at a time: not inside another's).
int WatchUntilFinished(const CommandContext& context, const std::shared_ptr<grpc::Channel>& channel,
                       int64_t id, v1::Job* final_job = nullptr, bool leave_on_interrupt = false);

}  // namespace anisoscope::client
