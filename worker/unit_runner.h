// UnitRunner: runs one leased unit through the engine, from the lease to the upload.
//
// The steps of a unit, one function each: resolve its paths against the worker's own
// allowed roots, build the probe (token ids as sent; text tokenized with the checkpoint's
// tokenizer), tell the server the probe's id (it may skip a stored step), extract with the
// lease kept alive, upload. A failure becomes a FailWork in one place (ReportFailure):
// a stop gives the lease back, an out-of-memory is retryable, anything else fails the step
// with the error naming the file and field. Not thread-safe: one runner per worker thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/extractor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/path_policy.h"
#include "worker/lease_keeper.h"
#include "worker/work_client.h"

namespace anisoscope::worker {

// Makes an extractor computing in `dtype` (the unit's extraction option).
using ExtractorFactory =
    std::function<absl::StatusOr<std::unique_ptr<analysis::Extractor>>(const std::string& dtype)>;

class UnitRunner {
 public:
  // None is owned; all outlive the runner.
  UnitRunner(const ExtractorFactory* factory, const PathPolicy* policy, WorkClient* client,
             std::string worker_name)
      : factory_(factory), policy_(policy), client_(client), name_(std::move(worker_name)) {}

  // Runs `unit` to its end: uploaded, reported failed or given back, or dropped because the
  // server ended the lease. Blocks for the extraction.
  void Run(const ::anisoscope::v1::WorkUnit& unit);

 private:
  // OK when the unit was uploaded or the server ended its lease.
  absl::Status RunSteps(const ::anisoscope::v1::WorkUnit& unit, LeaseKeeper* keeper);
  absl::StatusOr<analysis::ProbeSpec> ProbeSpecOf(const ::anisoscope::v1::UnitProbe& probe) const;
  absl::StatusOr<analysis::Extractor*> ExtractorFor(const std::string& dtype);
  absl::Status Upload(const ::anisoscope::v1::WorkUnit& unit, const analysis::Probe& probe,
                      const std::filesystem::path& dir, const analysis::CheckpointMetrics& metrics);
  void ReportFailure(const ::anisoscope::v1::WorkUnit& unit, const absl::Status& status);

  const ExtractorFactory* const factory_;
  const PathPolicy* const policy_;
  WorkClient* const client_;
  const std::string name_;
  std::string dtype_;  // of extractor_
  std::unique_ptr<analysis::Extractor> extractor_;
};

}  // namespace anisoscope::worker
