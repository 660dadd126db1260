// The partition isotropy I(W) of an input embedding matrix (METRICS.md "Per checkpoint";
// Mu & Viswanath 2018, Machina & Mercer's IW): Z(c) = Σ_i exp(c·w_i) over the rows w_i,
// I(W) = min_k Z(c_k) / max_k Z(c_k) for c_k = ±u_k, the unit eigenvectors of WᵀW. Computed
// in log space. Thread-safe; blocks for O(V d²) work.
#pragma once

#include <ATen/ATen.h>

namespace anisoscope::analysis {

// embedding [V, d], any float dtype and device.
double EmbeddingPartitionIsotropy(const at::Tensor& embedding);

}  // namespace anisoscope::analysis
