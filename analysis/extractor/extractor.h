// Extractor: (checkpoint, probe, device) -> CheckpointMetrics, the engine's one entry point.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/metrics/checkpoint_metrics.h"
#include "analysis/probe/probe.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

struct ExtractCallbacks {
  // Polled between batches; when it returns true, Extract returns CANCELLED.
  std::function<bool()> cancelled;
  // Called after each batch with (batches done, batches in all).
  std::function<void(int done, int total)> progress;
  // Called once the weight files are hashed (CheckpointMetrics::fingerprint), before the
  // model is built; `cancelled` is polled right after.
  std::function<void(const std::string& fingerprint)> fingerprinted;
};

// The seam between the server and the engine (tests substitute fakes).
class Extractor {
 public:
  virtual ~Extractor() = default;

  // Every file of both calls is opened through `files` (FileGate::Host() only for the
  // process's own paths: benchmarks, tests).

  // Builds the probe for one checkpoint: reads token ids, or tokenizes text with the
  // checkpoint's vocab.txt; seq_len 0 becomes the model's maximum. Cheap; no weights read.
  virtual absl::StatusOr<Probe> BuildProbe(const std::filesystem::path& checkpoint_dir,
                                           const ProbeSpec& spec, const FileGate& files) = 0;

  // Loads the checkpoint, runs the probe, returns its metrics. Blocks. Errors name the
  // checkpoint file and field; LibTorch exceptions never escape.
  virtual absl::StatusOr<CheckpointMetrics> Extract(const std::filesystem::path& checkpoint_dir,
                                                    const Probe& probe,
                                                    const ExtractCallbacks& callbacks,
                                                    const FileGate& files) = 0;
};

struct TorchExtractorOptions {
  // "cpu", "cuda", "cuda:N".
  std::string device = "cpu";
  // Compute dtype of the forward: "float32", "float16", "bfloat16".
  std::string dtype = "float32";
  // Intra-op threads for CPU work; 0 uses every core.
  int num_threads = 0;
  // Samples per forward; bounds peak memory (one batch's attention of one layer). 0 picks
  // it per batch from the sequence length and the device's memory (analysis/extractor/batching.h).
  int batch_size = 0;
  // On CUDA, lets float32 matrix products use TF32 tensor cores (about 1e-3 relative per
  // product; docs/performance.md gives the deviation measured on the fixtures). Off: exact float32.
  // Process-wide in LibTorch and never switched back off: use it in a process that runs
  // on one CUDA device (a worker, the benchmark).
  bool allow_tf32 = false;
};

// Creates the LibTorch extractor; INVALID_ARGUMENT for a bad device or dtype,
// FAILED_PRECONDITION when CUDA is asked for and absent. Extract is not reentrant:
// use one extractor per worker thread.
absl::StatusOr<std::unique_ptr<Extractor>> CreateTorchExtractor(
    const TorchExtractorOptions& options);

}  // namespace anisoscope::analysis
