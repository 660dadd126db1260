// extract_bench: seconds per checkpoint and peak memory of the engine, with the cost of the
// metrics as a ratio against a forward-only baseline measured in the same run and the part
// of them whose work does not shrink with the probe timed alone; optionally
// a series of checkpoints one after another (what a worker does), timed without and with
// the next checkpoint read ahead (from a cold page cache with --cold), and the metrics as
// JSON (for bench/gpu/compare_metrics.py). With --against, the same extract with other metric
// groups is timed in the same run, the two alternating (one order, then the other), so that
// the cost of a group is a ratio the machine's drift does not reach.
//
//   build/bin/extract_bench CHECKPOINT_DIR PROBE.jsonl [--device cpu] [--dtype float32]
//       [--threads N] [--batch-size N] [--repeats N] [--allow-tf32]
//       [--series DIR... [--cold]] [--metrics-json FILE] [--metrics GROUPS] [--against GROUPS]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/checkpoint/checkpoint_prefetcher.h"
#include "analysis/checkpoint/fingerprint.h"
#include "analysis/checkpoint/weight_files.h"
#include "analysis/extractor/batching.h"
#include "analysis/extractor/device_memory.h"
#include "analysis/extractor/extractor.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "analysis/metrics/embedding_isotropy.h"
#include "analysis/metrics/spectral_statistics.h"
#include "analysis/models/transformer_model.h"
#include "bench/cpu_usage.h"
#include "common/process_memory.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

struct BenchOptions {
  fs::path checkpoint;
  fs::path probe;
  TorchExtractorOptions extractor;
  int repeats = 3;
  std::vector<fs::path> series;
  bool cold = false;  // evict the series' weight files from the page cache before each pass
  fs::path metrics_json;
  std::string metrics = "all";  // the metric groups computed (metric_groups.h)
  std::string against;          // other metric groups, timed alternately with `metrics`
};

// A ForwardObserver that keeps nothing: the baseline forward.
class NullObserver : public ForwardObserver {
 public:
  void OnHiddenState(int, const at::Tensor&) override {}
  void OnAttention(int, const at::Tensor&, const at::Tensor&, const at::Tensor&) override {}
};

// Resident memory now (/proc/self/statm), MiB.
double CurrentRssMiB() {
  long pages_total = 0, pages_resident = 0;
  std::ifstream("/proc/self/statm") >> pages_total >> pages_resident;
  return pages_resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// The highest anonymous resident memory (RssAnon) while it lives, sampled every 10 ms: the
// memory a step holds beyond the pages of its mapped weight files, which the kernel keeps
// no high-water mark of.
class AnonymousPeak {
 public:
  AnonymousPeak()
      : sampler_([this] {
          while (!done_) {
            Sample();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~AnonymousPeak() {
    done_ = true;
    sampler_.join();
  }
  double MiB() {
    Sample();
    return static_cast<double>(peak_) / 1048576.0;
  }

 private:
  void Sample() {
    const uint64_t now = anisoscope::AnonymousResidentBytes();
    for (uint64_t seen = peak_; now > seen && !peak_.compare_exchange_weak(seen, now);) {
    }
  }
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> peak_{0};
  std::thread sampler_;
};

// The floating-point operations of a forward over `batches`: 2 per multiply-add of every
// projection matrix for each position of a batch (padding included, as computed), and the
// attention's two [T, T] products per layer. The projections are the checkpoint's matrices
// that are not tables looked up by token or position, by their Hugging Face names
// (embeddings, wte/wpe, lm_head, and BERT's pooler, which no metric runs).
double ForwardFlops(const Checkpoint& checkpoint, const ModelShape& shape,
                    const std::vector<Batch>& batches) {
  double projection = 0;
  for (const auto& [name, stored] : checkpoint.tensors()) {
    const bool table = absl::StrContains(name, "embed") || absl::StrContains(name, "wte") ||
                       absl::StrContains(name, "wpe") || absl::StrContains(name, "lm_head") ||
                       absl::StrContains(name, "pooler");
    if (stored.tensor.dim() != 2 || table) continue;
    projection += static_cast<double>(stored.tensor.numel());
  }
  double flops = 0;
  for (const Batch& batch : batches) {
    const double positions = static_cast<double>(batch.samples.size()) * batch.length;
    flops += 2 * positions * projection +
             4 * positions * batch.length * shape.hidden_size * shape.num_layers;
  }
  return flops;
}

[[noreturn]] void Fail(const absl::Status& status) {
  std::fprintf(stderr, "extract_bench: %s\n", status.ToString().c_str());
  std::exit(1);
}

// The second-wave metrics whose work does not shrink with the probe, timed alone.
struct PerCheckpointSeconds {
  double partition = 0;  // the embedding's partition function: two V x d x d products, eigh
  double spectra = 0;    // one d x d eigen-solve per hidden state
  double total() const { return partition + spectra; }
};

struct BaselineSeconds {
  double load = 0;     // checkpoint read and model on the device
  double forward = 0;  // forward of every batch, no metrics
  double flops = 0;    // of that forward (ForwardFlops)
  CpuUsage forward_cpu;
  double forward_anonymous_mib = 0;  // the anonymous peak during the forward
  PerCheckpointSeconds per_checkpoint;
};

// The per-checkpoint part of the metrics on `model`, the spectra from Gram matrices of its
// hidden size built from `count` vectors (the solves' cost does not depend on the values).
PerCheckpointSeconds TimePerCheckpointMetrics(const TransformerModel& model, int64_t count) {
  const int64_t dim = model.shape().hidden_size;
  const at::Tensor vectors = at::randn({count, dim}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor gram = at::mm(vectors.t(), vectors).to(model.device());
  const at::Tensor sum = vectors.sum(0).to(model.device());
  const at::Tensor shift = at::zeros_like(sum);
  PerCheckpointSeconds seconds;
  auto start = std::chrono::steady_clock::now();
  double checksum = EmbeddingPartitionIsotropy(model.input_embedding());
  seconds.partition = Seconds(start);
  start = std::chrono::steady_clock::now();
  for (int state = 0; state <= model.shape().num_layers; ++state) {
    checksum += ComputeSpectralStatistics(gram, sum, shift, count).sv_skewness;
  }
  seconds.spectra = Seconds(start);
  if (checksum == 1e300) std::printf(" ");  // keeps the work from being optimized away
  return seconds;
}

// The load, then the forward alone with the extractor's batching, then the per-checkpoint
// metrics alone on the loaded model when the probe's groups have them; the device is
// drained before each clock stops.
BaselineSeconds TimeBaseline(const fs::path& dir, const Probe& probe,
                             const TorchExtractorOptions& options) {
  c10::InferenceMode guard;
  BaselineSeconds seconds;
  const at::Device target(options.device);
  at::Tensor drain = at::zeros({1}, at::TensorOptions().device(target));
  drain.cpu();
  const auto load_start = std::chrono::steady_clock::now();
  auto checkpoint = Checkpoint::Load(dir, anisoscope::FileGate::Host());
  if (!checkpoint.ok()) Fail(checkpoint.status());
  auto model = CreateModel(*checkpoint, {options.device, options.dtype});
  if (!model.ok()) Fail(model.status());
  const at::Device device = (*model)->device();
  drain.add_(1).cpu();
  seconds.load = Seconds(load_start);
  const std::vector<Batch> batches =
      PlanBatches(probe, (*model)->shape(), options.batch_size,
                  BatchBudgetBytes(device, checkpoint->size_bytes()));
  seconds.flops = ForwardFlops(*checkpoint, (*model)->shape(), batches);
  NullObserver observer;
  {
    AnonymousPeak anonymous;
    const CpuUsage cpu_before = CpuUsage::Now();
    const auto start = std::chrono::steady_clock::now();
    for (const Batch& batch : batches) {
      const BatchTensors tensors = MakeBatchTensors(probe, batch, device);
      (*model)->Forward(tensors.ids, tensors.valid, observer);
    }
    drain.add_(1).cpu();
    seconds.forward = Seconds(start);
    seconds.forward_cpu = CpuUsage::Now() - cpu_before;
    seconds.forward_anonymous_mib = anonymous.MiB();
  }
  if (Has(probe.metric_groups, MetricGroup::kSpectra) ||
      Has(probe.metric_groups, MetricGroup::kWeights)) {
    seconds.per_checkpoint = TimePerCheckpointMetrics(**model, probe.num_tokens());
  }
  return seconds;
}

struct ReadFigures {
  double seconds = 0;
  uint64_t bytes = 0;  // of the weight files (Checkpoint::size_bytes)
};

// The checkpoint's read alone: Checkpoint::Load, then every stored byte touched (a sum per
// tensor), so that mapped files are faulted in as a forward would.
ReadFigures TimeRead(const fs::path& dir) {
  c10::InferenceMode guard;
  const auto start = std::chrono::steady_clock::now();
  auto checkpoint = Checkpoint::Load(dir, anisoscope::FileGate::Host());
  if (!checkpoint.ok()) Fail(checkpoint.status());
  double checksum = 0;
  for (const auto& [name, stored] : checkpoint->tensors()) {
    if (stored.tensor.numel() > 0) checksum += stored.tensor.sum().item<double>();
  }
  const double seconds = Seconds(start);
  if (checksum == 1e300) std::printf(" ");  // keeps the sums from being optimized away
  return {seconds, checkpoint->size_bytes()};
}

uint64_t DirectoryBytes(const fs::path& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

// The metrics in tests/reference/metrics_reference.py's layout, named by the metric lists
// of checkpoint_metrics.h (hidden-state names without their "hidden_" prefix).
void WriteMetricsJson(const CheckpointMetrics& metrics, const fs::path& file) {
  const int heads_per_layer = metrics.shape.num_heads;
  nlohmann::json heads = nlohmann::json::array();
  for (const HeadMetrics& h : metrics.heads)
    heads.push_back({{"layer", h.layer}, {"head", h.head}});
  nlohmann::json hidden = nlohmann::json::array();
  for (const HiddenStateMetrics& h : metrics.hidden_states) hidden.push_back({{"index", h.index}});
  ForEachScalar(metrics, [&](std::string_view name, int layer, int head, double value) {
    if (head < 0) {
      hidden[layer][std::string(name.substr(std::string_view("hidden_").size()))] = value;
    } else {
      heads[layer * heads_per_layer + head][std::string(name)] = value;
    }
  });
  ForEachVector(metrics,
                [&](std::string_view kind, int layer, int head, const std::vector<double>& values) {
                  heads[layer * heads_per_layer + head][std::string(kind)] = values;
                });
  std::ofstream(file) << nlohmann::json{{"num_tokens", metrics.num_tokens},
                                        {"heads", heads},
                                        {"hidden_states", hidden}}
                             .dump(1)
                      << "\n";
}

CheckpointMetrics ExtractOnce(Extractor& extractor, const fs::path& dir, const Probe& probe) {
  auto metrics = extractor.Extract(dir, probe, {}, anisoscope::FileGate::Host());
  if (!metrics.ok()) Fail(metrics.status());
  return *metrics;
}

// Drops the weight files of `dir` from the page cache (their pages are clean: no root
// needed), so that the next read comes from the disk.
void EvictFromPageCache(const fs::path& dir) {
  auto weights = FindWeightFiles(dir, anisoscope::FileGate::Host());
  if (!weights.ok()) Fail(weights.status());
  for (const fs::path& file : weights->files) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Each checkpoint of the series once, in order, as a worker would, with or without the next
// one read ahead meanwhile (as workers do with the server's hint); returns the seconds.
double RunSeries(Extractor& extractor, const BenchOptions& options, const Probe& probe,
                 bool read_ahead) {
  if (options.cold) {
    ::sync();
    for (const fs::path& dir : options.series) EvictFromPageCache(dir);
  }
  CheckpointPrefetcher prefetcher;
  const auto start = std::chrono::steady_clock::now();
  double slowest = 0;
  for (size_t i = 0; i < options.series.size(); ++i) {
    if (read_ahead && i + 1 < options.series.size())
      prefetcher.Start(options.series[i + 1], anisoscope::FileGate::Host());
    const auto one = std::chrono::steady_clock::now();
    ExtractOnce(extractor, options.series[i], probe);
    slowest = std::max(slowest, Seconds(one));
  }
  const double total = Seconds(start);
  std::printf(
      "series of %zu checkpoints%s, %s: %.3f s in all, %.3f s per checkpoint (slowest "
      "%.3f s)\n",
      options.series.size(), options.cold ? " from a cold page cache" : "",
      read_ahead ? "next one read ahead" : "no read-ahead", total, total / options.series.size(),
      slowest);
  return total;
}

// The checkpoint's fingerprint alone (the weight files hashed, as every extract does),
// best of three from the page cache.
ReadFigures TimeFingerprint(const fs::path& dir) {
  auto checkpoint = Checkpoint::Load(dir, anisoscope::FileGate::Host());
  if (!checkpoint.ok()) Fail(checkpoint.status());
  ReadFigures figures;
  figures.bytes = checkpoint->size_bytes();
  figures.seconds = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto start = std::chrono::steady_clock::now();
    auto fingerprint = FingerprintFiles(checkpoint->weight_files(), anisoscope::FileGate::Host());
    if (!fingerprint.ok()) Fail(fingerprint.status());
    figures.seconds = std::min(figures.seconds, Seconds(start));
  }
  return figures;
}

Probe BuildProbe(Extractor& extractor, const BenchOptions& options, MetricGroups groups) {
  ProbeSpec spec;
  spec.file = options.probe;
  spec.metric_groups = groups;
  auto probe = extractor.BuildProbe(options.checkpoint, spec, anisoscope::FileGate::Host());
  if (!probe.ok()) Fail(probe.status());
  return *std::move(probe);
}

MetricGroups ParseGroups(const std::string& text) {
  auto groups = ParseMetricGroups(text);
  if (!groups.ok()) Fail(groups.status());
  return *groups;
}

int Run(const BenchOptions& options) {
  auto extractor = CreateTorchExtractor(options.extractor);
  if (!extractor.ok()) Fail(extractor.status());
  const MetricGroups groups = ParseGroups(options.metrics);
  const Probe probe = BuildProbe(**extractor, options, groups);
  std::optional<Probe> other_probe;
  if (!options.against.empty()) {
    other_probe = BuildProbe(**extractor, options, ParseGroups(options.against));
  }
  const at::Device device(options.extractor.device);
  at::zeros({1}, at::TensorOptions().device(device)).cpu();  // sets up the device's allocator
  std::printf(
      "checkpoint %s, probe %zu x %lld tokens, metrics %s, device %s, dtype %s%s, %d threads, "
      "batch %s\n",
      options.checkpoint.c_str(), probe.samples.size(), static_cast<long long>(probe.max_length()),
      MetricGroupsText(groups).c_str(), options.extractor.device.c_str(),
      options.extractor.dtype.c_str(), options.extractor.allow_tf32 ? " (TF32)" : "",
      at::get_num_threads(),
      options.extractor.batch_size > 0 ? std::to_string(options.extractor.batch_size).c_str()
                                       : "auto");
  const double rss_before = CurrentRssMiB();  // the runtime, before any checkpoint is read
  const double anonymous_before = MiB(anisoscope::AnonymousResidentBytes());
  double best_extract = 1e30, best_forward = 1e30, best_load = 1e30;
  BaselineSeconds fastest_forward;  // the figures of the best forward-only pass
  CpuUsage extract_cpu;             // of the best extract
  double anonymous_mib = 0;         // the anonymous peak of the extracts
  PerCheckpointSeconds best_fixed{1e30, 1e30};
  int64_t device_peak = 0;
  double peak_mib = 0;  // during the extracts alone, not the baseline's forward or the read
  CheckpointMetrics metrics;
  double best_other = 1e30;
  std::vector<double> pair_ratios;  // --against: each repeat's extract over the other's
  const auto time_other = [&] {
    const auto start = std::chrono::steady_clock::now();
    ExtractOnce(**extractor, options.checkpoint, *other_probe);
    return Seconds(start);
  };
  for (int r = 0; r < options.repeats; ++r) {
    // --against: the other groups first in every other repeat (an even --repeats favours
    // neither order).
    const bool other_first = other_probe && r % 2 == 1;
    double other = other_first ? time_other() : 0;
    ResetPeakMemory(device);
    anisoscope::ResetPeakResident();
    double extract = 0;
    {
      AnonymousPeak anonymous;
      const CpuUsage cpu_before = CpuUsage::Now();
      const auto start = std::chrono::steady_clock::now();
      metrics = ExtractOnce(**extractor, options.checkpoint, probe);
      extract = Seconds(start);
      if (extract < best_extract) extract_cpu = CpuUsage::Now() - cpu_before;
      best_extract = std::min(best_extract, extract);
      if (!other_first) anonymous_mib = std::max(anonymous_mib, anonymous.MiB());
    }
    device_peak = std::max(device_peak, PeakAllocatedBytes(device));
    // Not after the other extract: what its allocator kept would count as this one's.
    if (!other_first) peak_mib = std::max(peak_mib, anisoscope::PeakResidentBytes() / 1048576.0);
    if (other_probe) {
      if (!other_first) other = time_other();
      best_other = std::min(best_other, other);
      pair_ratios.push_back(extract / other);
    }
    const BaselineSeconds baseline = TimeBaseline(options.checkpoint, probe, options.extractor);
    if (baseline.forward < best_forward) fastest_forward = baseline;
    best_forward = std::min(best_forward, baseline.forward);
    best_load = std::min(best_load, baseline.load);
    if (baseline.per_checkpoint.total() < best_fixed.total()) best_fixed = baseline.per_checkpoint;
  }
  std::printf("extract (load + forward + metrics): %.3f s per checkpoint (best of %d)\n",
              best_extract, options.repeats);
  std::printf("forward only (load excluded):       %.3f s, %.1f GFLOP, %.1f GFLOP/s\n",
              best_forward, fastest_forward.flops / 1e9,
              fastest_forward.flops / best_forward / 1e9);
  std::printf(
      "kernel share of the CPU time:       forward %.1f %% (%ld page faults), extract %.1f %% "
      "(%ld page faults)\n",
      100 * fastest_forward.forward_cpu.kernel_share(), fastest_forward.forward_cpu.page_faults,
      100 * extract_cpu.kernel_share(), extract_cpu.page_faults);
  std::printf(
      "anonymous memory (RssAnon) peak:    extract %.1f MiB, forward %.1f MiB (%.1f MiB before "
      "the first load)\n",
      anonymous_mib, fastest_forward.forward_anonymous_mib, anonymous_before);
  std::printf("load alone (read, onto the device): %.3f s\n", best_load);
  const ReadFigures read = TimeRead(options.checkpoint);
  std::printf("read (load, every byte touched):    %.3f s, %.2f GB/s\n", read.seconds,
              read.bytes / read.seconds / 1e9);
  const ReadFigures hashed = TimeFingerprint(options.checkpoint);
  std::printf("fingerprint (XXH3-128, every byte): %.3f s, %.2f GB/s, %.1f %% of an extract\n",
              hashed.seconds, hashed.bytes / hashed.seconds / 1e9,
              100 * hashed.seconds / best_extract);
  std::printf("ratio extract / forward-only:       %.2f\n", best_extract / best_forward);
  if (other_probe) {
    std::printf("against metrics %s, same run:  %.3f s per checkpoint (best of %d)\n",
                MetricGroupsText(other_probe->metric_groups).c_str(), best_other, options.repeats);
    std::printf("ratio extract / against:            %.3f (best over best); each repeat:",
                best_extract / best_other);
    for (double ratio : pair_ratios) std::printf(" %.3f", ratio);
    std::printf("\n");
  }
  if (Has(groups, MetricGroup::kSpectra) || Has(groups, MetricGroup::kWeights)) {
    std::printf(
        "per-checkpoint metrics alone:       %.3f s, %.2f x the forward: the embedding's "
        "partition function %.3f s, %d eigen-solves of %d x %d %.3f s\n",
        best_fixed.total(), best_fixed.total() / best_forward, best_fixed.partition,
        metrics.shape.num_layers + 1, metrics.shape.hidden_size, metrics.shape.hidden_size,
        best_fixed.spectra);
  }
  const double checkpoint_mib = MiB(DirectoryBytes(options.checkpoint));
  std::printf(
      "checkpoint size %.1f MiB, peak RSS of an extract %.1f MiB (%.1f MiB before the first load; "
      "the "
      "checkpoint's steps added %.2f x its size)",
      checkpoint_mib, peak_mib, rss_before, (peak_mib - rss_before) / checkpoint_mib);
  if (device.is_cuda()) std::printf(", peak GPU memory (extract) %.1f MiB", MiB(device_peak));
  std::printf("\n");
  if (!options.metrics_json.empty()) WriteMetricsJson(metrics, options.metrics_json);
  if (!options.series.empty()) {
    const double plain = RunSeries(**extractor, options, probe, /*read_ahead=*/false);
    const double ahead = RunSeries(**extractor, options, probe, /*read_ahead=*/true);
    const double forwards = best_forward * options.series.size();
    std::printf("series / sum of forward-only times: %.2f without read-ahead, %.2f with\n",
                plain / forwards, ahead / forwards);
  }
  return 0;
}

}  // namespace
}  // namespace anisoscope::analysis

int main(int argc, char** argv) {
  using anisoscope::analysis::BenchOptions;
  BenchOptions options;
  CLI::App app("extract_bench: seconds per checkpoint and peak memory of the engine");
  app.add_option("checkpoint", options.checkpoint, "checkpoint directory")->required();
  app.add_option("probe", options.probe, "token-id probe (.jsonl)")->required();
  app.add_option("--device", options.extractor.device, "cpu, cuda or cuda:N")
      ->capture_default_str();
  app.add_option("--dtype", options.extractor.dtype, "float32, float16 or bfloat16")
      ->capture_default_str();
  app.add_option("--threads", options.extractor.num_threads, "intra-op threads; 0: every core")
      ->capture_default_str();
  app.add_option("--batch-size", options.extractor.batch_size, "samples per forward; 0: automatic")
      ->capture_default_str();
  app.add_option("--repeats", options.repeats, "timed extracts of CHECKPOINT (best is shown)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--allow-tf32", options.extractor.allow_tf32, "TF32 matrix products on CUDA");
  app.add_option("--series", options.series,
                 "more checkpoint directories, extracted once each in order after the above")
      ->take_all();
  app.add_flag("--cold", options.cold,
               "evict the series' weight files from the page cache before each pass");
  app.add_option("--metrics-json", options.metrics_json,
                 "write CHECKPOINT's metrics here, in the reference's JSON layout");
  app.add_option("--metrics", options.metrics,
                 "the metric groups computed, comma-separated (core, sharpness, spectra, "
                 "uniformity, activations, weights) or all")
      ->capture_default_str();
  app.add_option("--against", options.against,
                 "other metric groups (e.g. core): the same extract timed in the same run, the "
                 "two alternating, with their ratio");
  CLI11_PARSE(app, argc, argv);
  return anisoscope::analysis::Run(options);
}
