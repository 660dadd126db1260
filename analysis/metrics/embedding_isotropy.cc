#include "analysis/metrics/embedding_isotropy.h"

#include <algorithm>
#include <limits>

#include "analysis/models/model_layers.h"

namespace anisoscope::analysis {
namespace {

// Rows per chunk: bounds the [rows, d] scores held at once.
constexpr int64_t kChunkRows = 4096;

// Folds logsumexp over `scores`' rows, of the scores and of their negatives, into `log_z_plus`
// and `log_z_minus` (float64): one pass for both shifts.
void AddLogSumExps(const at::Tensor& scores, at::Tensor& log_z_plus, at::Tensor& log_z_minus) {
  const auto [low, high] = at::aminmax(scores, 0);
  const at::Tensor plus = (scores - high).exp_().sum(0).log_().add_(high);
  // log Σ exp(−s) = log Σ exp(low − s) − low.
  const at::Tensor minus = (low - scores).exp_().sum(0).log_().sub_(low);
  log_z_plus = at::logaddexp(log_z_plus, plus.to(at::kDouble));
  log_z_minus = at::logaddexp(log_z_minus, minus.to(at::kDouble));
}

}  // namespace

double EmbeddingPartitionIsotropy(const at::Tensor& embedding) {
  // The products run in float32, chunk by chunk, and are summed in float64: V·d² work
  // twice, which in float64 would cost more than a forward of a small probe.
  const at::Tensor w = embedding.to(at::kFloat);
  const int64_t rows = w.size(0), dim = w.size(1);
  const at::TensorOptions doubles = at::TensorOptions().dtype(at::kDouble).device(w.device());
  at::Tensor gram = at::zeros({dim, dim}, doubles);
  for (int64_t start = 0; start < rows; start += kChunkRows) {
    // A transposed view into BLAS's product (oneDNN's Linear, which would reorder its
    // transposed copy as a weight, took 2.5 times as long).
    const at::Tensor chunk = w.narrow(0, start, std::min(kChunkRows, rows - start));
    gram += at::mm(chunk.t(), chunk).to(at::kDouble);
  }
  // Rows u_kᵀ, so that Linear(chunk, {directions}) = chunk · [u_1 … u_d].
  const at::Tensor directions = std::get<1>(at::linalg_eigh(gram)).t().contiguous().to(at::kFloat);
  at::Tensor log_z_plus = at::full({dim}, -std::numeric_limits<double>::infinity(), doubles);
  at::Tensor log_z_minus = log_z_plus.clone();
  for (int64_t start = 0; start < rows; start += kChunkRows) {
    const at::Tensor scores = Linear(w.narrow(0, start, std::min(kChunkRows, rows - start)),
                                     {directions, at::Tensor()});  // [rows, d]: u_k · w_i
    AddLogSumExps(scores, log_z_plus, log_z_minus);
  }
  const at::Tensor log_z = at::cat({log_z_plus, log_z_minus});  // log Z(±u_k)
  return at::exp(log_z.min() - log_z.max()).to(at::kCPU).item<double>();
}

}  // namespace anisoscope::analysis
