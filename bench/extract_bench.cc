// extract_bench: seconds per checkpoint and peak memory of the engine, with the cost of the
// metrics as a ratio against a forward-only baseline measured in the same run.
//
//   build/bin/extract_bench CHECKPOINT_DIR PROBE.jsonl [--device cpu] [--threads N]
//                           [--batch-size N (default 0: automatic)] [--repeats N]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "analysis/batching.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/extractor.h"
#include "analysis/models/transformer_model.h"

namespace anisoscope::analysis {
namespace {

// A ForwardObserver that keeps nothing: the baseline forward.
class NullObserver : public ForwardObserver {
 public:
  void OnHiddenState(int, const at::Tensor&) override {}
  void OnAttention(int, const at::Tensor&, const at::Tensor&, const at::Tensor&) override {}
};

double PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Forward only, with the extractor's batching.
double TimeForwardOnly(const std::filesystem::path& dir, const Probe& probe,
                       const TorchExtractorOptions& options) {
  c10::InferenceMode guard;
  auto checkpoint = Checkpoint::Load(dir);
  auto model = CreateModel(*checkpoint, {options.device, options.dtype});
  if (!model.ok()) {
    std::fprintf(stderr, "extract_bench: %s\n", model.status().ToString().c_str());
    std::exit(1);
  }
  const auto start = std::chrono::steady_clock::now();
  NullObserver observer;
  for (const Batch& batch : PlanBatches(probe, (*model)->shape(), options.batch_size)) {
    const BatchTensors tensors = MakeBatchTensors(probe, batch, (*model)->device());
    (*model)->Forward(tensors.ids, tensors.valid, observer);
  }
  return Seconds(start);
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: extract_bench CHECKPOINT_DIR PROBE.jsonl [--device cpu] [--threads N] "
                 "[--batch-size N] [--repeats N]\n");
    return 2;
  }
  TorchExtractorOptions options;
  int repeats = 3;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--device")
      options.device = argv[i + 1];
    else if (flag == "--threads")
      options.num_threads = std::atoi(argv[i + 1]);
    else if (flag == "--batch-size")
      options.batch_size = std::atoi(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "extract_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  auto extractor = CreateTorchExtractor(options);
  if (!extractor.ok()) {
    std::fprintf(stderr, "extract_bench: %s\n", extractor.status().ToString().c_str());
    return 1;
  }
  ProbeSpec spec;
  spec.file = argv[2];
  auto probe = (*extractor)->BuildProbe(argv[1], spec);
  if (!probe.ok()) {
    std::fprintf(stderr, "extract_bench: %s\n", probe.status().ToString().c_str());
    return 1;
  }
  std::printf("checkpoint %s, probe %zu x %lld tokens, device %s, %d threads, batch %s\n", argv[1],
              probe->samples.size(), static_cast<long long>(probe->max_length()),
              options.device.c_str(), at::get_num_threads(),
              options.batch_size > 0 ? std::to_string(options.batch_size).c_str() : "auto");
  double best_extract = 1e30, best_forward = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    auto metrics = (*extractor)->Extract(argv[1], *probe, {});
    if (!metrics.ok()) {
      std::fprintf(stderr, "extract_bench: %s\n", metrics.status().ToString().c_str());
      return 1;
    }
    best_extract = std::min(best_extract, Seconds(start));
    best_forward = std::min(best_forward, TimeForwardOnly(argv[1], *probe, options));
  }
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  std::printf("extract (load + forward + metrics): %.3f s per checkpoint (best of %d)\n",
              best_extract, repeats);
  std::printf("forward only (load excluded):       %.3f s\n", best_forward);
  std::printf("ratio extract / forward-only:       %.2f\n", best_extract / best_forward);
  std::printf("checkpoint size %.1f MiB, peak RSS %.1f MiB\n", bytes / 1048576.0, PeakRssMiB());
  return 0;
}

}  // namespace
}  // namespace anisoscope::analysis

int main(int argc, char** argv) { return anisoscope::analysis::Main(argc, argv); }
