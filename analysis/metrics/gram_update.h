// The hidden states' float64 Gram matrices (spectra): G += XᵀX, batch after batch. On the
// CPU with the system BLAS (Debian's libblas-dev; at run time the OpenBLAS that LibTorch
// itself uses) it is one dsyrk, which forms only the upper triangle: half the multiply-adds
// of a matrix product, about 1.5 to 1.9 times faster here (docs/performance.md). Elsewhere
// (CUDA, or a build without that BLAS) a full matrix product. Either way, read the sum
// through SymmetricGram.
#pragma once

#include <ATen/ATen.h>

namespace anisoscope::analysis {

// gram [D, D] float64, rows [N, D] float64, on one device.
void AddGram(at::Tensor& gram, const at::Tensor& rows);

// The whole symmetric matrix of a sum AddGram built: its upper triangle mirrored.
at::Tensor SymmetricGram(const at::Tensor& gram);

}  // namespace anisoscope::analysis
