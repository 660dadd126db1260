// Extractor: (checkpoint, probe, device) -> CheckpointMetrics, the engine's one entry point.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/probe/probe.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

// Tokens per sample of a probe whose job gives no length (ProbeSpec::seq_len 0), where the
// model's maximum is no shorter: BERT (512) and GPT-2 (1024) keep theirs, Pythia's is this;
// 128 samples of it are the server's default --max-probe-tokens; a sample of 32k or 128k
// positions would hold a layer's attention, [T, T] per head, of 128 GiB to 2 TiB
// (docs/cli.md).
inline constexpr int64_t kDefaultSeqLen = 2048;

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
  // checkpoint's tokenizer; seq_len 0 becomes kDefaultSeqLen or the model's maximum length
  // where that is shorter. Cheap: reads config.json (all of it checked, as Extract does),
  // never the weights. INVALID_ARGUMENT for a seq_len past the model's maximum.
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
