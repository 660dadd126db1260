// The AVX-512 way of float_selection.h (a sampled bracket, compressed passes, ranks counted in
// vector lanes). Compiled for AVX-512 by function attributes, so the build needs no flag and
// runs anywhere: callers ask Avx512SelectionAvailable() first.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/metrics/float_selection.h"

namespace anisoscope::analysis {

// Whether this CPU (and its OS) runs AVX-512F code.
bool Avx512SelectionAvailable();

// values[0 … n), n >= 1, or their absolute values; empty for a row holding a NaN (the radix
// way orders NaNs, compares cannot). `scratch` grows to 3n + 48 floats. Call only where
// Avx512SelectionAvailable().
std::optional<RowSummary> Avx512SummarizeRow(const float* values, int64_t n, bool absolute,
                                             std::vector<float>& scratch);

}  // namespace anisoscope::analysis
