// FakeExtractor: a deterministic stand-in for the LibTorch engine, for server tests.
//
// Every worker's extractor shares one FakeEngine, which records what was extracted and
// lets a test make a checkpoint fail or block. Metrics depend only on the checkpoint
// directory's name (FakeMetricsFor), so tests can predict what is stored.
#pragma once

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analysis/extractor/extractor.h"
#include "worker/unit_runner.h"

namespace anisoscope::server::testing {

// Shape of the fake model: 2 layers, 2 heads, head_dim 4 ("bert").
analysis::CheckpointMetrics FakeMetricsFor(const std::filesystem::path& checkpoint_dir);
// The probe id the fake gives a probe file: its token ids' id (ComputeProbeId) for a token
// file, else "p" + 32 hex digits of a hash of its bytes.
std::string FakeProbeId(const std::filesystem::path& probe_file);
// The fake's fingerprint of a checkpoint: the first word of its file "fingerprint" (write
// "xxh3-128:" and 32 hex digits to two directories to make them duplicates); "" without one.
std::string FakeFingerprintOf(const std::filesystem::path& checkpoint_dir,
                              const FileGate& files = FileGate::Host());

class FakeEngine {
 public:
  // Batches per Extract (one progress call each).
  static constexpr int kBatches = 3;

  // Extract of a directory with this basename fails with INVALID_ARGUMENT.
  void FailOn(const std::string& basename);
  // Extract of a directory with this basename returns metrics whose upload is past the gRPC
  // message limit (common/message_limits.h): a result that can never be sent.
  void HugeUploadOn(const std::string& basename);
  // Extract of a directory with this basename waits until Release or cancellation.
  void BlockOn(const std::string& basename);
  void Release();
  // Each batch takes this long (the workers send progress as it comes; batches faster
  // than a heartbeat's round trip are reported together).
  void SetBatchDelay(absl::Duration delay);

  // Basenames whose Extract ran to the end, in order.
  std::vector<std::string> Extracted() const;
  // Number of Extract calls that have started (completed or not).
  int Started() const;
  // Waits until `n` Extract calls have started; false after 10 s.
  bool WaitStarted(int n) const;

  worker::ExtractorFactory Factory();

 private:
  friend class FakeExtractor;
  mutable absl::Mutex mu_;
  std::set<std::string> fail_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> block_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> huge_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration batch_delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> extracted_ ABSL_GUARDED_BY(mu_);
};

class FakeExtractor : public analysis::Extractor {
 public:
  explicit FakeExtractor(FakeEngine* engine) : engine_(engine) {}

  // Both open the checkpoint directory and probe file through `files`, as the real engine
  // does, so a refused path fails the step here too.
  absl::StatusOr<analysis::Probe> BuildProbe(const std::filesystem::path& checkpoint_dir,
                                             const analysis::ProbeSpec& spec,
                                             const FileGate& files) override;
  absl::StatusOr<analysis::CheckpointMetrics> Extract(const std::filesystem::path& checkpoint_dir,
                                                      const analysis::Probe& probe,
                                                      const analysis::ExtractCallbacks& callbacks,
                                                      const FileGate& files) override;

 private:
  FakeEngine* const engine_;
};

}  // namespace anisoscope::server::testing
