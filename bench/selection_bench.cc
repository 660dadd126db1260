// selection_bench: the attention rows' order statistics (analysis/metrics/float_selection.h),
// the way this CPU takes against the radix selection, on softmax rows like those of the
// `sharpness` metrics, both timed in one run, one after the other in each repeat. The results
// are compared too: any difference fails the run.
//
//   build/bin/selection_bench [--rows N] [--repeats N]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "analysis/metrics/float_selection.h"
#include "analysis/metrics/float_selection_avx512.h"

namespace anisoscope::analysis {
namespace {

// `rows` softmax rows of `length` logits drawn from N(0, spread²): a small spread is an
// untrained head's near-uniform row, a large one a trained head's few large weights.
std::vector<float> SoftmaxRows(int rows, int length, float spread, std::mt19937& random) {
  std::normal_distribution<float> logit(0.0f, spread);
  std::vector<float> data(static_cast<size_t>(rows) * length);
  for (int r = 0; r < rows; ++r) {
    float* row = &data[static_cast<size_t>(r) * length];
    float sum = 0;
    for (int j = 0; j < length; ++j) sum += row[j] = std::exp(logit(random));
    for (int j = 0; j < length; ++j) row[j] /= sum;
  }
  return data;
}

template <typename Summarize>
double MicrosecondsPerRow(const std::vector<float>& data, int rows, int length, Summarize summarize,
                          std::vector<RowSummary>& out) {
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rows; ++r) out[r] = summarize(&data[static_cast<size_t>(r) * length]);
  const std::chrono::duration<double, std::micro> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / rows;
}

int Run(int rows, int repeats) {
  std::printf("selection_bench: %d softmax rows per case, one thread, best of %d; this CPU: %s\n",
              rows, repeats,
              Avx512SelectionAvailable() ? "AVX-512 (the sampled bracket)" : "radix only");
  std::mt19937 random(7);
  SelectionScratch scratch;
  std::vector<RowSummary> chosen(rows), radix(rows);
  for (const int length : {128, 512, 768}) {
    for (const float spread : {0.02f, 2.0f, 6.0f}) {
      const std::vector<float> data = SoftmaxRows(rows, length, spread, random);
      const auto this_cpus_way = [&](const float* row) {
        return SummarizeRow(row, length, scratch);
      };
      const auto radix_way = [&](const float* row) {
        return RadixSummarizeRow(row, length, /*absolute=*/false, scratch);
      };
      double best_chosen = 1e30, best_radix = 1e30;
      for (int r = 0; r < repeats; ++r) {
        best_chosen =
            std::min(best_chosen, MicrosecondsPerRow(data, rows, length, this_cpus_way, chosen));
        best_radix = std::min(best_radix, MicrosecondsPerRow(data, rows, length, radix_way, radix));
      }
      for (int r = 0; r < rows; ++r) {
        if (chosen[r].min != radix[r].min || chosen[r].max != radix[r].max ||
            chosen[r].median != radix[r].median) {
          std::fprintf(stderr, "selection_bench: the two ways differ on row %d of length %d\n", r,
                       length);
          return 1;
        }
      }
      std::printf("rows of %3d, logits' spread %4.2f: %.3f us per row, radix %.3f us: %.2f x\n",
                  length, spread, best_chosen, best_radix, best_radix / best_chosen);
    }
  }
  return 0;
}

}  // namespace
}  // namespace anisoscope::analysis

int main(int argc, char** argv) {
  int rows = 20000, repeats = 3;
  CLI::App app("selection_bench: the attention rows' order statistics, this CPU's way and radix");
  app.add_option("--rows", rows, "softmax rows per case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed passes of each way (best is shown)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return anisoscope::analysis::Run(rows, repeats);
}
