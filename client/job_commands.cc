#include "client/job_commands.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "client/interrupt_guard.h"
#include "client/job_formatters.h"
#include "client/progress_printer.h"
#include "client/source_flags.h"
#include "proto/final_states.h"

namespace anisoscope::client {
namespace {

constexpr char kJobHelp[] = "the job id printed by 'submit' (see 'jobs')";

// The JOB positional argument, or -1 after reporting a usage error.
int64_t JobId(const ParsedArgs& args, const CommandContext& context) {
  int64_t id = 0;
  const std::string& text = args.positionals().at(0);
  if (!ParseInt64(text, &id) || id <= 0) {
    context.UsageError(
        absl::StrCat("JOB: expected a job id (a positive integer), got '", text, "'"));
    return -1;
  }
  return id;
}

// A submitted job: its channel and the job as stored, or the exit code of the error
// already reported.
struct Submitted {
  int exit_code = kExitOk;
  std::shared_ptr<grpc::Channel> channel;
  v1::Job job;
};

// Builds the request of `submit` (with `follow`: of `follow`) and submits it.
Submitted BuildAndSubmit(const ParsedArgs& args, const CommandContext& context, bool follow,
                         v1::SubmitJobRequest* request) {
  Submitted submitted;
  absl::StatusOr<v1::SubmitJobRequest> built = BuildSubmitRequest(args, context.cwd(), follow);
  if (!built.ok()) {
    submitted.exit_code = context.UsageError(built.status().message());
    return submitted;
  }
  *request = *std::move(built);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = context.Connect();
  if (!channel.ok()) {
    submitted.exit_code = context.Error(channel.status().message());
    return submitted;
  }
  submitted.channel = *channel;
  grpc::ClientContext rpc;
  context.Prepare(&rpc);
  const grpc::Status status =
      v1::JobService::NewStub(submitted.channel)->SubmitJob(&rpc, *request, &submitted.job);
  if (!status.ok()) submitted.exit_code = context.RpcError(status);
  return submitted;
}

int RunSubmit(const ParsedArgs& args, const CommandContext& context) {
  v1::SubmitJobRequest request;
  const Submitted submitted = BuildAndSubmit(args, context, /*follow=*/false, &request);
  if (submitted.exit_code != kExitOk) return submitted.exit_code;
  const v1::Job& job = submitted.job;
  const int count = job.steps_total() > 0 ? job.steps_total() : job.checkpoints_size();
  context.out() << "job " << job.id() << " submitted: " << count << " checkpoint"
                << (count == 1 ? "" : "s") << " of run " << job.run() << "\n"
                << std::flush;
  if (!args.Has("wait")) return kExitOk;
  return WatchUntilFinished(context, submitted.channel, job.id(), nullptr,
                            /*leave_on_interrupt=*/true);
}

int RunFollow(const ParsedArgs& args, const CommandContext& context) {
  v1::SubmitJobRequest request;
  const Submitted submitted = BuildAndSubmit(args, context, /*follow=*/true, &request);
  if (submitted.exit_code != kExitOk) return submitted.exit_code;
  const v1::Job& job = submitted.job;
  auto stub = v1::JobService::NewStub(submitted.channel);
  const std::string followed =
      request.has_source() ? DescribeSource(request.source()) : request.checkpoints_dir();
  context.out() << "job " << job.id() << " follows " << followed << " for run " << job.run() << ": "
                << job.checkpoints_size() << " whole checkpoint"
                << (job.checkpoints_size() == 1 ? "" : "s") << " so far"
                << (request.has_until_step() ? absl::StrCat(", until step ", request.until_step())
                                             : std::string())
                << " (Ctrl-C stops)\n"
                << std::flush;
  // Ctrl-C cancels the job: the steps stored so far stay, the watch below ends.
  InterruptGuard guard([&context, &stub, id = job.id()] {
    grpc::ClientContext cancel_rpc;
    context.Prepare(&cancel_rpc);
    v1::CancelJobRequest cancel;
    cancel.set_id(id);
    v1::Job cancelled;
    if (grpc::Status status = stub->CancelJob(&cancel_rpc, cancel, &cancelled); !status.ok()) {
      context.RpcError(status);
    }
  });
  v1::Job last;
  const int code = WatchUntilFinished(context, submitted.channel, job.id(), &last);
  if (!guard.interrupted() || last.state() != v1::JOB_STATE_CANCELLED) return code;
  for (const v1::CheckpointStatus& checkpoint : last.checkpoints()) {
    if (checkpoint.state() == v1::STEP_STATE_FAILED) return kExitFailure;
  }
  return kExitOk;  // stopped as asked, nothing failed
}

int RunStatus(const ParsedArgs& args, const CommandContext& context) {
  const int64_t id = JobId(args, context);
  if (id < 0) return kExitUsage;
  auto channel = context.Connect();
  if (!channel.ok()) return context.Error(channel.status().message());
  v1::GetJobRequest request;
  request.set_id(id);
  grpc::ClientContext rpc;
  context.Prepare(&rpc);
  v1::Job job;
  grpc::Status status = v1::JobService::NewStub(*channel)->GetJob(&rpc, request, &job);
  if (!status.ok()) return context.RpcError(status);
  context.out() << JobDetails(job);
  return kExitOk;
}

int RunJobs(const ParsedArgs& args, const CommandContext& context) {
  auto channel = context.Connect();
  if (!channel.ok()) return context.Error(channel.status().message());
  v1::ListJobsRequest request;
  request.set_limit(static_cast<int32_t>(args.GetInt("limit", 20)));
  grpc::ClientContext rpc;
  context.Prepare(&rpc);
  v1::ListJobsResponse response;
  grpc::Status status = v1::JobService::NewStub(*channel)->ListJobs(&rpc, request, &response);
  if (!status.ok()) return context.RpcError(status);
  context.out() << JobsTable({response.jobs().begin(), response.jobs().end()});
  return kExitOk;
}

int RunCancel(const ParsedArgs& args, const CommandContext& context) {
  const int64_t id = JobId(args, context);
  if (id < 0) return kExitUsage;
  auto channel = context.Connect();
  if (!channel.ok()) return context.Error(channel.status().message());
  v1::CancelJobRequest request;
  request.set_id(id);
  grpc::ClientContext rpc;
  context.Prepare(&rpc);
  v1::Job job;
  grpc::Status status = v1::JobService::NewStub(*channel)->CancelJob(&rpc, request, &job);
  if (!status.ok()) return context.RpcError(status);
  if (job.state() == v1::JOB_STATE_CANCELLED) {
    context.out() << "job " << id << " cancelled\n";
  } else if (v1::IsFinal(job.state())) {
    context.out() << "job " << id << " had already " << JobStateName(job.state()) << "\n";
  } else {
    context.out() << "job " << id << " cancel requested (state: " << JobStateName(job.state())
                  << ")\n";
  }
  return kExitOk;
}

int RunWatch(const ParsedArgs& args, const CommandContext& context) {
  const int64_t id = JobId(args, context);
  if (id < 0) return kExitUsage;
  auto channel = context.Connect();
  if (!channel.ok()) return context.Error(channel.status().message());
  return WatchUntilFinished(context, *channel, id, nullptr, /*leave_on_interrupt=*/true);
}

// --metrics' help: the groups from their one list (analysis/metric_catalog/metric_groups.h).
std::string MetricsFlagHelp() {
  std::string help =
      "the metric groups to compute, comma-separated (default all; core is\n"
      "always computed; a step stored without a group lacks its metrics):";
  for (const analysis::NamedMetricGroup& group : analysis::AllMetricGroups()) {
    absl::StrAppend(&help, "\n  ", group.name, ": ", group.summary);
  }
  return help;
}

}  // namespace

std::string AbsolutePath(const std::string& path, const std::string& cwd) {
  std::filesystem::path full = std::filesystem::path(cwd) / path;  // `/` keeps absolute paths
  for (const auto& part : full) {
    if (part == "..") return full.string();
  }
  return full.lexically_normal().string();
}

absl::StatusOr<v1::SubmitJobRequest> BuildSubmitRequest(const ParsedArgs& args,
                                                        const std::string& cwd, bool follow) {
  // Only what the request cannot say is checked here (two flags for one field, a flag's
  // syntax); every rule of a job is the server's, and its message is shown as it is.
  v1::SubmitJobRequest request;
  request.set_run(args.GetString("run", ""));
  const std::string command = follow ? "follow" : "submit";
  std::vector<SeriesFlag> folders = {{"checkpoints", "DIR"}, {"hf-cache", "DIR"}};
  if (!follow) folders.push_back({"checkpoint", "STEP=PATH"});
  absl::StatusOr<bool> remote = ReadSource(args, command, folders, request.mutable_source());
  if (!remote.ok()) return remote.status();
  if (!*remote) request.clear_source();
  if (args.Has("checkpoints") && args.Has("hf-cache")) {
    return absl::InvalidArgumentError(OneSeriesMessage(command, folders));
  }
  const bool hf_cache = args.Has("hf-cache");
  const bool has_dir = args.Has("checkpoints") || hf_cache;
  if (has_dir) {
    request.set_checkpoints_dir(
        AbsolutePath(args.GetString(hf_cache ? "hf-cache" : "checkpoints"), cwd));
    request.set_hf_cache(hf_cache);
  }
  for (const std::string& value : args.GetAll("checkpoint")) {
    const size_t eq = value.find('=');
    int64_t step = 0;
    if (eq == std::string::npos || !ParseInt64(value.substr(0, eq), &step) ||
        eq + 1 == value.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--checkpoint: expected STEP=PATH with STEP >= 0, got '", value, "'"));
    }
    v1::CheckpointRef* ref = request.add_checkpoints();
    ref->set_step(step);
    ref->set_path(AbsolutePath(value.substr(eq + 1), cwd));
  }
  const bool has_tokens = args.Has("probe-tokens");
  const bool has_text = args.Has("probe-text");
  if (has_tokens && has_text) {
    return absl::InvalidArgumentError("submit: give --probe-tokens F or --probe-text F, not both");
  }
  request.set_force(args.Has("force"));
  request.set_dedupe(args.Has("dedupe"));
  request.set_follow(follow || args.Has("follow"));
  if (args.Has("until-step")) request.set_until_step(args.GetInt("until-step"));
  if (!has_tokens && !has_text) return request;  // the server says what is missing
  v1::ProbeSpec* probe = request.mutable_probe();
  probe->set_source(has_text ? v1::PROBE_SOURCE_TEXT : v1::PROBE_SOURCE_TOKENS);
  probe->set_path(AbsolutePath(args.GetString(has_text ? "probe-text" : "probe-tokens"), cwd));
  if (args.Has("probe-mode")) {
    probe->set_mode(args.GetString("probe-mode") == "lines" ? v1::PROBE_MODE_LINES
                                                            : v1::PROBE_MODE_WINDOWS);
  } else if (has_text) {
    probe->set_mode(v1::PROBE_MODE_WINDOWS);
  }
  probe->set_samples(args.GetInt("samples", 0));
  probe->set_seq_len(args.GetInt("seq-len", 0));
  if (args.Has("token-samples")) probe->set_token_samples(args.GetInt("token-samples"));
  if (args.Has("metrics")) probe->set_metrics(args.GetString("metrics"));
  return request;
}

int WatchUntilFinished(const CommandContext& context, const std::shared_ptr<grpc::Channel>& channel,
                       int64_t id, v1::Job* final_job, bool leave_on_interrupt) {
  auto stub = v1::JobService::NewStub(channel);
  grpc::ClientContext rpc;
  context.Prepare(&rpc, /*deadline=*/false);  // jobs take as long as they take
  v1::WatchJobRequest request;
  request.set_id(id);
  // Ctrl-C ends the watch (the stream), never the job.
  std::optional<InterruptGuard> guard;
  if (leave_on_interrupt) guard.emplace([&rpc] { rpc.TryCancel(); });
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub->WatchJob(&rpc, request);
  ProgressPrinter printer(context.err_is_tty());
  v1::JobEvent event;
  v1::Job last;
  bool seen = false;
  while (reader->Read(&event)) {
    context.err() << printer.Render(event) << std::flush;
    last = event.job();
    seen = true;
  }
  const grpc::Status status = reader->Finish();
  context.err() << printer.Clear() << std::flush;
  const bool ended = status.ok() && seen && v1::IsFinal(last.state());
  if (guard.has_value() && guard->interrupted() && !ended) {
    context.err() << "job " << id << " continues: `anisoscope watch " << id
                  << "`, `anisoscope cancel " << id << "`\n"
                  << std::flush;
    return kExitInterrupted;
  }
  if (!status.ok()) return context.RpcError(status);
  if (!seen || !v1::IsFinal(last.state())) {
    return context.Error(
        absl::StrCat("the server ended the watch of job ", id, " before the job finished"));
  }
  context.out() << ProgressPrinter::Summary(last) << std::flush;
  if (final_job != nullptr) *final_job = last;
  return ProgressPrinter::Succeeded(last) ? kExitOk : kExitFailure;
}

std::vector<Command> JobCommands() {
  CommandSpec submit;
  submit.name = "submit";
  submit.synopsis =
      "--run NAME (--checkpoints DIR | --hf-cache DIR | --checkpoint STEP=PATH ... |\n"
      "--hub ORG/NAME | --hub-repos PATTERN [--revision R] | --s3 s3://BUCKET/PREFIX/)\n"
      "[--revisions A,B,...] [--glob PATTERN]\n"
      "(--probe-tokens F | --probe-text F [--probe-mode windows|lines])\n"
      "[--samples N] [--seq-len L] [--token-samples M] [--metrics GROUPS] [--force]\n"
      "[--dedupe] [--wait] [--follow [--until-step N]]";
  submit.summary = "analyze a run's checkpoints with a probe (queues a job)";
  submit.flags = {
      StringFlag("run", "NAME", "the run the steps belong to"),
      StringFlag("checkpoints", "DIR",
                 "a directory whose subdirectories are the steps (step_20k, step1000,\n"
                 "checkpoint-200, stage1-step1000-tokens4B, ckpt_042, ...), or a\n"
                 "Hugging Face cache repository"),
      StringFlag("hf-cache", "DIR",
                 "a Hugging Face cache repository (hub/models--ORG--NAME): its refs\n"
                 "(revisions such as step1000) name the steps, its snapshots hold them"),
      RepeatedFlag("checkpoint", "STEP=PATH",
                   "one checkpoint (repeatable), instead of --checkpoints"),
      StringFlag("probe-tokens", "F", "probe: JSON lines of token ids, used verbatim"),
      StringFlag("probe-text", "F", "probe: text, tokenized with each checkpoint's vocabulary"),
      ChoiceFlag("probe-mode", {"windows", "lines"},
                 "how --probe-text becomes samples: windows of the token\n"
                 "stream, or one sample per line (default windows)"),
      IntFlag("samples", "N", "number of probe samples (default 128)", 1),
      IntFlag("seq-len", "L", "tokens per sample (default: 2048, or the model's maximum if shorter)", 1),
      IntFlag("token-samples", "M",
              "keep Q and K of M probe tokens per head and step, for 'token-cloud'\n"
              "(default 128; 0: none; at most the probe's tokens)",
              0, 65536),
      StringFlag("metrics", "GROUPS", MetricsFlagHelp()),
      BoolFlag("force", "recompute and replace steps already stored for this probe"),
      BoolFlag("dedupe",
               "skip a step whose weights are the same as an earlier stored step's\n"
               "(equal fingerprints: a suite serving one checkpoint under two names)"),
      BoolFlag("wait", "then follow the job until it ends, like 'watch'"),
      BoolFlag("follow",
               "keep watching --checkpoints DIR: each new step directory joins the job\n"
               "once it is whole (see 'follow')"),
      IntFlag("until-step", "N", "with --follow: end after step N (later steps are ignored)", 0),
  };
  // The remote sources after the folders and files, as the synopsis lists them.
  const std::vector<FlagSpec> sources = SourceFlags();
  submit.flags.insert(std::find_if(submit.flags.begin(), submit.flags.end(),
                                   [](const FlagSpec& flag) { return flag.name == "probe-tokens"; }),
                      sources.begin(), sources.end());
  submit.details =
      "Relative paths are made absolute against the current directory; the server\n"
      "reads them and refuses paths outside its --allow-root directories. A remote\n"
      "series (--hub, --hub-repos, --s3) is listed by the server, within its\n"
      "--allow-source, and each step is downloaded by the worker that computes it,\n"
      "into that worker's --cache-dir; 'audit' lists one first. See docs/sources.md.\n"
      "Prints the job id. With --wait, progress goes to stderr and a summary line to\n"
      "stdout; the exit status is 0 only if every checkpoint was done or skipped.\n"
      "Ctrl-C during --wait leaves the job running (exit 130; see 'watch', 'cancel').\n";

  CommandSpec follow;
  follow.name = "follow";
  follow.synopsis =
      "--run NAME (--checkpoints DIR | --hf-cache DIR | --hub ORG/NAME |\n"
      "--hub-repos PATTERN [--revision R] | --s3 s3://BUCKET/PREFIX/)\n"
      "[--revisions A,B,...] [--glob PATTERN]\n"
      "(--probe-tokens F | --probe-text F [--probe-mode M])\n"
      "[--samples N] [--seq-len L] [--token-samples M] [--metrics GROUPS] [--force]\n"
      "[--dedupe] [--until-step N]";
  follow.summary = "analyze a run while it trains: each new checkpoint once it is whole";
  for (const FlagSpec& flag : submit.flags) {
    if (flag.name != "checkpoint" && flag.name != "wait" && flag.name != "follow") {
      follow.flags.push_back(flag);
    }
    if (flag.name == "until-step") {  // follow always follows: no "with --follow"
      follow.flags.back().help = "end after step N is analysed (later steps are ignored)";
    }
  }
  follow.details =
      "Submits a job that follows DIR, or a remote series' refs or prefix (the server\n"
      "lists it every --follow-interval seconds)\n"
      "and shows its progress until step --until-step is analysed, or until Ctrl-C, which\n"
      "cancels the job (the steps stored so far stay). A step directory joins the job once\n"
      "it is whole: config.json parses and every weight file is completely written (a\n"
      "safetensors file as long as its header says, a .bin zip whose central directory\n"
      "reads, every shard of an index), so a checkpoint being saved is never analysed half\n"
      "written, and each step is analysed once. Exits 0 when every step was done or\n"
      "skipped (stopping with Ctrl-C included), 1 when one failed.\n";

  CommandSpec status;
  status.name = "status";
  status.synopsis = "JOB";
  status.summary = "show a job: state, run, probe and each checkpoint";
  status.positionals = {{"JOB", kJobHelp}};

  CommandSpec jobs;
  jobs.name = "jobs";
  jobs.synopsis = "[--limit N]";
  jobs.summary = "list recent jobs";
  jobs.flags = {IntFlag("limit", "N", "show at most N jobs (default 20)", 1, INT32_MAX)};

  CommandSpec cancel;
  cancel.name = "cancel";
  cancel.synopsis = "JOB";
  cancel.summary = "cancel a queued or running job";
  cancel.positionals = {{"JOB", kJobHelp}};

  CommandSpec watch;
  watch.name = "watch";
  watch.synopsis = "JOB";
  watch.summary = "follow a job until it ends (like submit --wait)";
  watch.positionals = {{"JOB", kJobHelp}};
  watch.details =
      "Progress goes to stderr, one line per finished checkpoint, and a summary line\n"
      "to stdout. Exits 0 only if every checkpoint was done or skipped, 1 otherwise.\n"
      "Ctrl-C ends the watch, not the job: it prints how to watch or cancel the job\n"
      "and exits 130.\n";

  return {{submit, RunSubmit}, {follow, RunFollow}, {status, RunStatus},
          {jobs, RunJobs},     {cancel, RunCancel}, {watch, RunWatch}};
}

}  // namespace anisoscope::client
