// The LibTorch Extractor: loads a checkpoint, runs the probe batch by batch (batching.h)
// and folds each batch into a MetricsObserver.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/checkpoint/fingerprint.h"
#include "analysis/extractor/batching.h"
#include "analysis/extractor/extractor.h"
#include "analysis/extractor/host_memory.h"
#include "analysis/metrics/embedding_isotropy.h"
#include "analysis/metrics/metrics_observer.h"
#include "analysis/models/transformer_model.h"
#include "analysis/probe/checkpoint_tokenizer.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

// Checks every token id and length against the model; errors name the config file.
absl::Status ValidateProbe(const Probe& probe, const ModelShape& shape,
                           const std::filesystem::path& config_path) {
  if (probe.samples.empty()) return absl::InvalidArgumentError("the probe has no samples");
  for (size_t s = 0; s < probe.samples.size(); ++s) {
    const std::vector<int64_t>& sample = probe.samples[s];
    if (sample.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("probe sample ", s, " is empty"));
    }
    if (static_cast<int64_t>(sample.size()) > shape.max_positions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "probe sample ", s, " has ", sample.size(), " tokens, more than ", config_path.string(),
          " maximum length (", shape.max_positions_key, " ", shape.max_positions, ")"));
    }
    for (size_t t = 0; t < sample.size(); ++t) {
      if (sample[t] < 0 || sample[t] >= shape.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "probe sample ", s, " token ", t, " has id ", sample[t], ", outside the vocabulary of ",
            config_path.string(), " (vocab_size ", shape.vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

// Refuses a dtype this LibTorch cannot run on the device before any checkpoint is read:
// Debian's 1.13 has no float16 LayerNorm on the CPU (every step would fail).
absl::Status CheckDtypeRunsOn(at::ScalarType dtype, const TorchExtractorOptions& options) {
  if (dtype != at::kHalf || options.device != "cpu") return absl::OkStatus();
  try {
    const at::Tensor x = at::ones({1, 2}, at::TensorOptions().dtype(dtype));
    at::layer_norm(x, {2});
    at::gelu(x);
  } catch (const c10::Error&) {
    return absl::InvalidArgumentError(
        "dtype 'float16' is not supported on the CPU by this LibTorch (no half-precision "
        "LayerNorm kernel); use bfloat16 or float32 there, float16 on CUDA");
  }
  return absl::OkStatus();
}

// Q and K token samples travel and are stored as float64: M is capped so that they take at
// most this much per step (a BERT-base keeps 227 positions, a Pythia-1B 64), well inside
// the 64 MiB message limit of an upload.
constexpr int64_t kMaxTokenSampleBytes = int64_t{32} << 20;

int64_t TokenSamplesFor(const ModelShape& shape, int64_t requested) {
  const int64_t bytes_per_position =
      2 * int64_t{shape.num_layers} * shape.num_heads * shape.head_dim * int64_t{sizeof(double)};
  return std::min(requested, kMaxTokenSampleBytes / std::max<int64_t>(bytes_per_position, 1));
}

class TorchExtractor : public Extractor {
 public:
  explicit TorchExtractor(const TorchExtractorOptions& options) : options_(options) {}

  absl::StatusOr<Probe> BuildProbe(const std::filesystem::path& checkpoint_dir,
                                   const ProbeSpec& spec, const FileGate& files) override;
  absl::StatusOr<CheckpointMetrics> Extract(const std::filesystem::path& checkpoint_dir,
                                            const Probe& probe, const ExtractCallbacks& callbacks,
                                            const FileGate& files) override;

 private:
  // BuildProbe without the token samples.
  absl::StatusOr<Probe> BuildProbeSamples(const std::filesystem::path& checkpoint_dir,
                                          const ProbeSpec& spec, const FileGate& files);
  // Extract, with LibTorch's exceptions turned into statuses.
  absl::StatusOr<CheckpointMetrics> ExtractCatching(const std::filesystem::path& checkpoint_dir,
                                                    const Probe& probe,
                                                    const ExtractCallbacks& callbacks,
                                                    const FileGate& files);
  absl::StatusOr<CheckpointMetrics> ExtractUnguarded(const std::filesystem::path& checkpoint_dir,
                                                     const Probe& probe,
                                                     const ExtractCallbacks& callbacks,
                                                     const FileGate& files);

  TorchExtractorOptions options_;
};

absl::StatusOr<Probe> TorchExtractor::BuildProbe(const std::filesystem::path& checkpoint_dir,
                                                 const ProbeSpec& spec, const FileGate& files) {
  if (spec.token_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("token samples must be 0 (none) or positive, got ", spec.token_samples));
  }
  ASSIGN_OR_RETURN(Probe probe, BuildProbeSamples(checkpoint_dir, spec, files));
  probe.token_samples = spec.token_samples;
  probe.metric_groups = spec.metric_groups;
  return probe;
}

absl::StatusOr<Probe> TorchExtractor::BuildProbeSamples(const std::filesystem::path& checkpoint_dir,
                                                        const ProbeSpec& spec,
                                                        const FileGate& files) {
  ASSIGN_OR_RETURN(nlohmann::json config, ReadConfig(checkpoint_dir, files));
  const std::filesystem::path config_path = checkpoint_dir / "config.json";
  // The family's config reader says the longest sample (its sliding window where shorter).
  ASSIGN_OR_RETURN(const ModelShape shape, ReadModelShape(config, config_path));
  const int64_t seq_len =
      spec.seq_len == 0 ? std::min(shape.max_positions, kDefaultSeqLen) : spec.seq_len;
  if (seq_len > shape.max_positions) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq-len ", seq_len, " exceeds ", config_path.string(), " maximum length (",
                     shape.max_positions_key, " ", shape.max_positions, ")"));
  }
  if (spec.source == ProbeSource::kTokens) {
    if (!spec.token_ids.empty()) {
      return TokenProbeFromIds(spec.token_ids, spec.file, spec.samples, seq_len);
    }
    return ReadTokenProbe(spec.file, spec.samples, seq_len, files);
  }
  ASSIGN_OR_RETURN(CheckpointTokenizer tokenizer,
                   LoadCheckpointTokenizer(checkpoint_dir, config, files));
  return BuildTextProbe(spec.file, *tokenizer.tokenizer, tokenizer.framing, spec.mode, spec.samples,
                        seq_len, files);
}

absl::StatusOr<CheckpointMetrics> TorchExtractor::Extract(
    const std::filesystem::path& checkpoint_dir, const Probe& probe,
    const ExtractCallbacks& callbacks, const FileGate& files) {
  absl::StatusOr<CheckpointMetrics> metrics =
      ExtractCatching(checkpoint_dir, probe, callbacks, files);
  ReleaseFreedHostMemory();  // the model and every activation are freed by now
  return metrics;
}

absl::StatusOr<CheckpointMetrics> TorchExtractor::ExtractCatching(
    const std::filesystem::path& checkpoint_dir, const Probe& probe,
    const ExtractCallbacks& callbacks, const FileGate& files) {
  try {
    return ExtractUnguarded(checkpoint_dir, probe, callbacks, files);
  } catch (const c10::OutOfMemoryError& error) {
    // The device's trouble, not the checkpoint's: a worker may retry it (smaller batch, other
    // device).
    return absl::ResourceExhaustedError(
        absl::StrCat("checkpoint ", checkpoint_dir.string(),
                     ": out of memory: ", error.what_without_backtrace()));
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("checkpoint ", checkpoint_dir.string(),
                                            ": LibTorch error: ", error.what_without_backtrace()));
  } catch (const std::exception& error) {
    return absl::InternalError(
        absl::StrCat("checkpoint ", checkpoint_dir.string(), ": ", error.what()));
  }
}

absl::StatusOr<CheckpointMetrics> TorchExtractor::ExtractUnguarded(
    const std::filesystem::path& checkpoint_dir, const Probe& probe,
    const ExtractCallbacks& callbacks, const FileGate& files) {
  const auto start = std::chrono::steady_clock::now();
  c10::InferenceMode inference_mode;
  std::unique_ptr<TransformerModel> model;
  uint64_t checkpoint_bytes = 0;
  std::string fingerprint;
  const auto cancelled = [&] { return callbacks.cancelled && callbacks.cancelled(); };
  const auto cancelled_error = [&] {
    return absl::CancelledError(
        absl::StrCat("checkpoint ", checkpoint_dir.string(), ": extraction cancelled"));
  };
  {
    // The checkpoint's own tensors are released once the model holds its copies or views.
    ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Load(checkpoint_dir, files));
    // Hashed before the model is built: a duplicate the caller skips costs no more.
    ASSIGN_OR_RETURN(fingerprint, FingerprintFiles(checkpoint.weight_files(), files));
    if (callbacks.fingerprinted) callbacks.fingerprinted(fingerprint);
    if (cancelled()) return cancelled_error();
    ASSIGN_OR_RETURN(model, CreateModel(checkpoint, {options_.device, options_.dtype}));
    RETURN_IF_ERROR(ValidateProbe(probe, model->shape(), checkpoint.config_path()));
    checkpoint_bytes = checkpoint.size_bytes();
  }
  const at::Device device = model->device();

  std::vector<int64_t> sample_lengths;
  for (const std::vector<int64_t>& sample : probe.samples) {
    sample_lengths.push_back(static_cast<int64_t>(sample.size()));
  }
  MetricsObserver observer(model->shape(), device, sample_lengths,
                           TokenSamplesFor(model->shape(), probe.token_samples),
                           probe.metric_groups);
  const std::vector<Batch> batches = PlanBatches(probe, model->shape(), options_.batch_size,
                                                 BatchBudgetBytes(device, checkpoint_bytes));
  const int total = static_cast<int>(batches.size());
  for (int index = 0; index < total; ++index) {
    if (cancelled()) return cancelled_error();
    const BatchTensors batch = MakeBatchTensors(probe, batches[index], device);
    observer.BeginBatch(batch.valid, batch.valid_count, batches[index].samples);
    model->Forward(batch.ids, batch.valid, observer);
    if (callbacks.progress) callbacks.progress(index + 1, total);
  }
  CheckpointMetrics metrics = observer.Finish();
  if (Has(probe.metric_groups, MetricGroup::kWeights)) {
    metrics.embed_partition_isotropy = EmbeddingPartitionIsotropy(model->input_embedding());
    const at::Tensor gain = model->final_norm_gain().to(at::kCPU, at::kDouble).contiguous();
    metrics.final_norm_gain.assign(gain.data_ptr<double>(), gain.data_ptr<double>() + gain.numel());
  }
  metrics.fingerprint = std::move(fingerprint);
  metrics.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return metrics;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Extractor>> CreateTorchExtractor(
    const TorchExtractorOptions& options) {
  try {
    const at::Device device(options.device);
    if (device.is_cuda() && !at::hasCUDA()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device '", options.device, "' requested but this LibTorch has no CUDA device"));
    }
    if (!device.is_cpu() && !device.is_cuda()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device '", options.device, "' is not cpu, cuda or cuda:N"));
    }
  } catch (const c10::Error&) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", options.device, "' is not cpu, cuda or cuda:N"));
  }
  ASSIGN_OR_RETURN(const at::ScalarType dtype, ParseDtype(options.dtype));
  RETURN_IF_ERROR(CheckDtypeRunsOn(dtype, options));
  if (options.batch_size < 0) {
    return absl::InvalidArgumentError("batch size must be 0 (automatic) or positive");
  }
  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  KeepFreedHostMemory();
  // Set only when asked: PyTorch 2.9+ refuses to mix this legacy switch with its newer
  // precision settings, which its CPU kernels read, and the default is already off.
  if (options.allow_tf32) at::globalContext().setAllowTF32CuBLAS(true);
  return std::unique_ptr<Extractor>(new TorchExtractor(options));
}

}  // namespace anisoscope::analysis
