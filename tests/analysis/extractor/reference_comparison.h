// Shared by the reference tests: extracts a fixture checkpoint and compares the engine's
// metrics with the float64 reference's JSON (tests/reference/metrics_reference.py).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/extractor/extractor.h"

namespace anisoscope::analysis {

// $ANISOSCOPE_FIXTURES/<name> (fixtures/<name> when the variable is unset).
std::filesystem::path FixturePath(const std::string& name);

nlohmann::json ReadJson(const std::filesystem::path& path);

// `batch_size` samples per forward on $ANISOSCOPE_TEST_DEVICE (default cpu): the reference
// suites run unchanged on a GPU with ANISOSCOPE_TEST_DEVICE=cuda (bench/gpu/run.sh).
TorchExtractorOptions TestOptions(int batch_size);

// BuildProbe (token-id probe file) and Extract of one checkpoint; test failures on error.
CheckpointMetrics ExtractCheckpoint(const std::filesystem::path& checkpoint,
                                    const std::filesystem::path& probe_file,
                                    const TorchExtractorOptions& options = TestOptions(5));

// The largest deviations seen, printed for docs/performance.md's figures.
struct Deviations {
  double absolute = 0;  // cosines, entropies, anisotropies
  double relative = 0;  // norms, dots
  void Absolute(double a, double b);
  void Relative(double value);
  std::string ToString() const;
};

// Cosines, entropies, anisotropies, attention probabilities, isotropy scores, explained
// variances and σ_i/σ_1: absolute 2e-4. Norms, dots, max/median |x|, skewness: relative
// 1e-3. Vectors (q_mean, k_mean, q/k_mean_pre_rotary where the reference has them, else they
// must be empty; each token sample; final_norm_gain): each component within 1e-3 of the
// vector's norm.
void ExpectMatchesReference(const CheckpointMetrics& got, const nlohmann::json& want,
                            const std::string& where, Deviations& deviations);

}  // namespace anisoscope::analysis
