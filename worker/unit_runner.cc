#include "worker/unit_runner.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/metrics_upload.h"

namespace anisoscope::worker {
namespace {

namespace fs = std::filesystem;
namespace pb = ::anisoscope::v1;

// How long an upload or a failure report keeps retrying while the server is unreachable.
constexpr absl::Duration kReportPatience = absl::Minutes(10);
// How long an abandoned step's report may keep the process: the step is stuck meanwhile.
constexpr absl::Duration kAbandonPatience = absl::Seconds(5);

// Total size of the regular files under `dir`, `depth` folders down, as `files` sees them
// (links followed beneath its roots, e.g. HF cache blobs).
int64_t DirectoryBytes(const fs::path& dir, const FileGate& files, int depth = 3) {
  const absl::StatusOr<std::vector<GatedEntry>> entries = files.List(dir);
  if (!entries.ok()) return 0;
  int64_t total = 0;
  for (const GatedEntry& entry : *entries) {
    if (entry.is_file) {
      const absl::StatusOr<uint64_t> size = files.FileSize(dir / entry.name);
      if (size.ok()) total += static_cast<int64_t>(*size);
    } else if (entry.is_directory && depth > 0) {
      total += DirectoryBytes(dir / entry.name, files, depth - 1);
    }
  }
  return total;
}

}  // namespace

UnitRunner::UnitRunner(const ExtractorFactory* factory, const FileGate* own_files,
                       WorkClient* client, std::string worker_name, Guard guard,
                       RemoteSource* remote)
    : factory_(factory),
      own_files_(own_files),
      client_(client),
      name_(std::move(worker_name)),
      guard_(std::move(guard)),
      remote_(remote) {
  if (remote_ != nullptr) remote_steps_ = std::make_unique<RemoteSteps>(remote_, name_);
  if (guard_.abandon_process) {
    watchdog_ = std::make_unique<StepWatchdog>(
        guard_.bounds.step_timeout_seconds,
        [this](const std::string& why) { Abandon(why); });
  }
}

void UnitRunner::Run(const pb::WorkUnit& unit) {
  spdlog::info("worker {}: job {} step {} (attempt {}): {}", name_, unit.job_id(), unit.step(),
               unit.attempt(), unit.checkpoint_path());
  {
    absl::MutexLock lock(&unit_mu_);
    unit_ = unit;
  }
  auto keeper = std::make_unique<LeaseKeeper>(client_, unit);
  absl::StatusOr<std::optional<pb::CompleteWorkRequest>> upload;
  Held held;  // the remote step's pin: dropped once its upload or failure has been sent
  try {
    upload = RunSteps(unit, keeper.get(), &held);
  } catch (const std::bad_alloc&) {  // a reader's allocation refused (--worker-memory-max)
    upload = absl::ResourceExhaustedError(
        absl::StrCat("checkpoint ", unit.checkpoint_path(), ": std::bad_alloc"));
  }
  if (watchdog_ != nullptr) watchdog_->Finish();
  if (keeper->ended()) {
    spdlog::info("worker {}: job {} step {} ended by the server: {}", name_, unit.job_id(),
                 unit.step(), keeper->why());
  } else if (!upload.ok()) {
    ReportFailure(unit, upload.status(), held.fetch_failed);
  } else if (upload->has_value()) {
    StartUpload(unit, std::move(keeper), std::move(**upload), std::move(held.fetched));
  }
}

void UnitRunner::Idle() {
  if (remote_steps_ != nullptr) remote_steps_->DropPrefetched();
}

void UnitRunner::Flush() {
  if (upload_.joinable()) upload_.join();
}

absl::StatusOr<std::optional<pb::CompleteWorkRequest>> UnitRunner::RunSteps(
    const pb::WorkUnit& unit, LeaseKeeper* keeper, Held* held) {
  fs::path dir = fs::path(unit.checkpoint_path()).lexically_normal();
  if (unit.has_remote()) {
    absl::StatusOr<fetch::FetchedStep> fetched = FetchRemote(unit, keeper);
    if (!fetched.ok()) {
      held->fetch_failed = true;
      return fetched.status();
    }
    dir = fetched->folder;
    held->fetched = *std::move(fetched);
    if (keeper->ended()) return std::nullopt;
  }
  ASSIGN_OR_RETURN(const FileGate files, unit.has_remote() ? RemoteGateOf(unit) : GateOf(unit));
  const int64_t checkpoint_bytes = DirectoryBytes(dir, files);
  if (watchdog_ != nullptr) {
    watchdog_->Start(checkpoint_bytes);
  }
  if (!unit.has_remote()) PrefetchNext(unit, files);
  ASSIGN_OR_RETURN(const analysis::ProbeSpec spec, ProbeSpecOf(unit.probe()));
  ASSIGN_OR_RETURN(analysis::Extractor * extractor, ExtractorFor(unit.options().dtype()));
  ASSIGN_OR_RETURN(const analysis::Probe probe, extractor->BuildProbe(dir, spec, files));
  if (!keeper->ReportProbe(probe.id)) return std::nullopt;

  analysis::ExtractCallbacks callbacks;
  callbacks.cancelled = [this, keeper] { return keeper->ended() || client_->stopped(); };
  callbacks.progress = [this, keeper](int done, int total) {
    keeper->SetProgress(done, total);
    if (watchdog_ != nullptr) watchdog_->Progress(done, total);
  };
  callbacks.fingerprinted = [keeper](const std::string& fingerprint) {
    keeper->ReportFingerprint(fingerprint);
  };
  absl::StatusOr<analysis::CheckpointMetrics> metrics =
      extractor->Extract(dir, probe, callbacks, files);
  if (!metrics.ok()) {
    if (absl::IsCancelled(metrics.status()) && !keeper->ended() && !client_->stopped()) {
      // Only an interruption asked for counts as cancelled; anything else failed.
      return absl::InternalError(std::string(metrics.status().message()));
    }
    return metrics.status();
  }
  keeper->FlushProgress();
  pb::CompleteWorkRequest request;
  request.set_lease_id(unit.lease_id());
  pb::Probe* probe_info = request.mutable_probe();
  probe_info->set_id(probe.id);
  probe_info->set_description(probe.description);
  probe_info->set_num_samples(metrics->num_samples);
  probe_info->set_num_tokens(metrics->num_tokens);
  *request.mutable_metrics() = ToUpload(*metrics);
  request.set_checkpoint_bytes(checkpoint_bytes);
  request.set_seconds(metrics->seconds);
  request.set_fingerprint(metrics->fingerprint);
  if (held->fetched.has_value()) {
    const fetch::FetchStats& stats = held->fetched->stats;
    pb::FetchStats* fetch = request.mutable_fetch();
    fetch->set_cache_hit(stats.cache_hit);
    fetch->set_bytes_fetched(stats.bytes_fetched);
    fetch->set_retries(stats.retries);
    fetch->set_seconds(stats.seconds);
  }
  return request;
}

absl::StatusOr<fetch::FetchedStep> UnitRunner::FetchRemote(const pb::WorkUnit& unit,
                                                           LeaseKeeper* keeper) {
  if (remote_steps_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker '", name_, "' cannot fetch remote steps (no sources configured)"));
  }
  const auto on_progress = [keeper](const fetch::FetchProgress& progress) {
    pb::FetchProgress wire;
    wire.set_bytes_done(progress.step_bytes);
    wire.set_bytes_total(progress.step_size);
    wire.set_bytes_per_second(progress.bytes_per_second);
    wire.set_cache_bytes(
        static_cast<int64_t>(progress.cache_bytes + progress.cache_reserved_bytes));
    keeper->SetFetch(wire);
  };
  absl::StatusOr<fetch::FetchedStep> fetched = remote_steps_->Fetch(
      unit, on_progress, [this, keeper] { return keeper->ended() || client_->stopped(); });
  if (fetched.ok()) keeper->FlushProgress();  // the download's last figures before the forward
  keeper->ClearFetch();
  return fetched;
}

absl::StatusOr<FileGate> UnitRunner::GateOf(const pb::WorkUnit& unit) const {
  if (unit.allowed_roots().empty()) {
    return absl::PermissionDeniedError(
        "the unit names no allowed roots (a server older than this worker?)");
  }
  FileGate files =
      own_files_->Intersect({unit.allowed_roots().begin(), unit.allowed_roots().end()});
  if (files.roots().empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("checkpoint '", unit.checkpoint_path(),
                     "': none of its namespace's roots lies within this worker's --allow-root"));
  }
  return files;
}

absl::StatusOr<FileGate> UnitRunner::RemoteGateOf(const pb::WorkUnit& unit) const {
  ASSIGN_OR_RETURN(FileGate files, FileGate::Beneath({remote_->cache_dir()}));
  if (!unit.probe().has_text()) return files;
  // A text probe is read where the unit's namespace may read, as for a folder's unit.
  ASSIGN_OR_RETURN(const FileGate roots, GateOf(unit));
  return files.Union(roots);
}

absl::StatusOr<analysis::ProbeSpec> UnitRunner::ProbeSpecOf(const pb::UnitProbe& probe) const {
  analysis::ProbeSpec spec;
  spec.samples = probe.samples();
  spec.seq_len = probe.seq_len();
  spec.token_samples = probe.token_samples();
  absl::StatusOr<analysis::MetricGroups> groups = analysis::ParseMetricGroups(probe.metrics());
  if (!groups.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the unit's metrics: ", groups.status().message()));
  }
  spec.metric_groups = *groups;
  if (probe.has_tokens()) {
    spec.source = analysis::ProbeSource::kTokens;
    spec.file = probe.tokens().file_name();
    for (const pb::TokenSample& sample : probe.tokens().samples()) {
      spec.token_ids.emplace_back(sample.ids().begin(), sample.ids().end());
    }
    return spec;
  }
  if (!probe.has_text()) {
    return absl::InvalidArgumentError("the unit's probe has neither tokens nor text");
  }
  spec.source = analysis::ProbeSource::kText;
  spec.file = fs::path(probe.text().path()).lexically_normal();
  spec.mode = probe.text().mode() == pb::PROBE_MODE_LINES ? analysis::TextMode::kLines
                                                          : analysis::TextMode::kWindows;
  return spec;
}

absl::StatusOr<analysis::Extractor*> UnitRunner::ExtractorFor(const std::string& dtype) {
  const std::string wanted = dtype.empty() ? "float32" : dtype;
  if (extractor_ == nullptr || dtype_ != wanted) {
    extractor_.reset();
    ASSIGN_OR_RETURN(extractor_, (*factory_)(wanted));
    dtype_ = wanted;
  }
  return extractor_.get();
}

void UnitRunner::StartUpload(const pb::WorkUnit& unit, std::unique_ptr<LeaseKeeper> keeper,
                             pb::CompleteWorkRequest request,
                             std::optional<fetch::FetchedStep> fetched) {
  Flush();
  // `fetched` (the pin) goes when the thread's function does: once Complete has returned.
  upload_ = std::thread([this, unit, keeper = std::move(keeper), request = std::move(request),
                         fetched = std::move(fetched)] {
    absl::StatusOr<pb::CompleteWorkResponse> response = client_->Complete(request, kReportPatience);
    if (!response.ok()) {
      // The server has ended the step itself (refused upload: failed; stale lease: someone
      // else's), or it stayed unreachable and the lease will expire: nothing to report.
      spdlog::error("worker {}: upload of job {} step {} not stored: {}", name_, unit.job_id(),
                    unit.step(), response.status().ToString());
      return;
    }
    spdlog::info("worker {}: job {} step {} {} in {:.2f} s", name_, unit.job_id(), unit.step(),
                 pb::StepState_Name(response->state()), request.seconds());
  });
}

void UnitRunner::PrefetchNext(const pb::WorkUnit& unit, const FileGate& files) {
  if (unit.next_checkpoint_path().empty()) return;
  prefetcher_.Start(fs::path(unit.next_checkpoint_path()).lexically_normal(), files);
}

void UnitRunner::ReportFailure(const pb::WorkUnit& unit, const absl::Status& status,
                               bool from_fetch) {
  pb::FailWorkRequest request;
  request.set_lease_id(unit.lease_id());
  if (client_->stopped() && absl::IsCancelled(status)) {
    request.set_kind(pb::FailWorkRequest::KIND_RELEASED);
    request.set_error("the worker stopped");
  } else if (from_fetch) {
    // The fetcher's message names repo, revision and file; another try may fare better only
    // where the network or the cache was the trouble.
    const bool retryable = absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
                           absl::IsResourceExhausted(status);
    request.set_kind(retryable ? pb::FailWorkRequest::KIND_RETRYABLE
                               : pb::FailWorkRequest::KIND_FAILED);
    request.set_error(retryable ? absl::StrCat("worker '", name_, "': ", status.message())
                                : std::string(status.message()));
  } else if (guard_.bounds.memory_max_bytes > 0 && IsAllocationFailure(status)) {
    request.set_kind(pb::FailWorkRequest::KIND_FAILED);  // the same file would hit it again
    request.set_error(absl::StrCat("worker '", name_, "': ", MemoryBoundError(guard_.bounds, status)));
  } else if (absl::IsResourceExhausted(status)) {
    request.set_kind(pb::FailWorkRequest::KIND_RETRYABLE);
    request.set_error(absl::StrCat("worker '", name_, "': ", status.message()));
  } else {
    request.set_kind(pb::FailWorkRequest::KIND_FAILED);
    request.set_error(absl::IsPermissionDenied(status)
                          ? absl::StrCat("worker '", name_, "' refuses: ", status.message())
                          : std::string(status.message()));
  }
  spdlog::warn("worker {}: job {} step {}: {} ({})", name_, unit.job_id(), unit.step(),
               request.error(), pb::FailWorkRequest::Kind_Name(request.kind()));
  if (absl::Status sent = client_->Fail(request, kReportPatience); !sent.ok()) {
    spdlog::error("worker {}: failure of job {} step {} not reported: {}", name_, unit.job_id(),
                  unit.step(), sent.ToString());
  }
}

void UnitRunner::Abandon(const std::string& why) {
  pb::WorkUnit unit;
  {
    absl::MutexLock lock(&unit_mu_);
    unit = unit_;
  }
  spdlog::error("worker {}: job {} step {}: {}; the process exits", name_, unit.job_id(),
                unit.step(), why);
  const std::string error =
      NearMemoryCap(guard_.bounds)
          ? MemoryBoundError(guard_.bounds,
                             absl::DeadlineExceededError(absl::StrCat(
                                 "it stopped making progress at the cap, waiting for memory "
                                 "the kernel refuses, and ", why)))
          : why;
  pb::FailWorkRequest request;
  request.set_lease_id(unit.lease_id());
  request.set_kind(pb::FailWorkRequest::KIND_FAILED);
  request.set_error(absl::StrCat("worker '", name_, "': ", error));
  // Refused when the lease has ended meanwhile (a cancel); unreachable: the lease expires.
  client_->Fail(request, kAbandonPatience).IgnoreError();
  guard_.abandon_process();
}

}  // namespace anisoscope::worker
