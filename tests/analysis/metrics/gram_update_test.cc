// AddGram's sums (dsyrk's upper triangle on the CPU) against one float64 matrix product of
// every row, mirrored by SymmetricGram; an empty batch adds nothing.
#include "analysis/metrics/gram_update.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace anisoscope::analysis {
namespace {

TEST(GramUpdateTest, BatchesSumToTheWholeProductExactlySymmetric) {
  at::manual_seed(5);
  const int64_t dim = 48;
  at::Tensor gram = at::zeros({dim, dim}, at::kDouble);
  std::vector<at::Tensor> batches;
  for (int64_t rows : {7, 0, 130, 1, 64}) {
    batches.push_back(at::randn({rows, dim}, at::kDouble) + 3.0);
    AddGram(gram, batches.back());
  }
  const at::Tensor all = at::cat(batches);
  const at::Tensor expected = at::mm(all.t(), all);
  const at::Tensor symmetric = SymmetricGram(gram);
  EXPECT_TRUE(at::equal(symmetric, symmetric.t()));
  const double error = (symmetric - expected).abs().max().item<double>();
  EXPECT_LT(error, 1e-12 * expected.abs().max().item<double>());
}

}  // namespace
}  // namespace anisoscope::analysis
