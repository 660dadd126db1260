#include "analysis/metrics/gram_update.h"

#ifdef ANISOSCOPE_WITH_CBLAS
#include <cblas.h>

#include <limits>
#endif

namespace anisoscope::analysis {

void AddGram(at::Tensor& gram, const at::Tensor& rows) {
  TORCH_CHECK(gram.dim() == 2 && rows.dim() == 2 && gram.size(0) == rows.size(1) &&
                  gram.size(1) == rows.size(1),
              "AddGram: gram [D, D] and rows [N, D] wanted");
  TORCH_CHECK(gram.scalar_type() == at::kDouble && rows.scalar_type() == at::kDouble &&
                  gram.device() == rows.device(),
              "AddGram: float64 tensors on one device wanted");
#ifdef ANISOSCOPE_WITH_CBLAS
  if (gram.device().is_cpu() && gram.is_contiguous() &&
      rows.size(0) <= std::numeric_limits<int>::max()) {
    const at::Tensor x = rows.contiguous();
    const int dim = static_cast<int>(x.size(1));
    // Row-major X [N, D]: C := 1·XᵀX + 1·C, upper triangle.
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, dim, static_cast<int>(x.size(0)), 1.0,
                x.data_ptr<double>(), dim, 1.0, gram.data_ptr<double>(), dim);
    return;
  }
#endif
  gram += at::mm(rows.t(), rows);
}

at::Tensor SymmetricGram(const at::Tensor& gram) { return gram.triu() + gram.triu(1).t(); }

}  // namespace anisoscope::analysis
