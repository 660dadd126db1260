// Batching: how a probe is cut into forward passes, and the tensors of one batch.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analysis/models/model_shape.h"
#include "analysis/probe/probe.h"

namespace anisoscope::analysis {

// Samples of one forward pass, longest first; `length` is the longest one's.
struct Batch {
  std::vector<size_t> samples;  // indices into Probe::samples
  int64_t length = 0;
};

// What one batch's largest per-layer tensor may take on the CPU when the checkpoint's size
// is not known (tests, benchmarks of a shape alone).
inline constexpr int64_t kCpuBatchBudgetBytes = int64_t{32} << 20;

// The bytes one batch's largest per-layer tensor may take on `device`, for a checkpoint of
// `checkpoint_bytes`. CPU: a 32nd of the checkpoint, between 4 and 256 MiB, so that a step
// adds at most ~1.2x the checkpoint to the resident memory (measured at 128 tokens: 1.06x
// for Pythia-160m in float16, 1.12x for BERT-base, 1.19x for GPT-2 small), and so that a
// large model's batches are large: each batch streams every weight of the model once (and
// widens the float16 and bfloat16 ones), a cost that grows with the model and is shared by
// the batch's tokens. A 7B model in bfloat16 gets 256 MiB: 16 x 128 tokens in one batch,
// where a 32 MiB ceiling made four.
// CUDA: an eighth of the free memory (a layer holds about four such tensors at once), at
// least 32 MiB and at most 2 GiB, past which larger batches no longer run faster.
int64_t BatchBudgetBytes(const at::Device& device, uint64_t checkpoint_bytes);

// Samples per batch when none is given: the most that keep the largest per-layer tensor
// (attention [B, H, T, T] or feed-forward [B, T, 4D], float32) within `budget_bytes`.
int AutoBatchSize(const ModelShape& shape, int64_t length,
                  int64_t budget_bytes = kCpuBatchBudgetBytes);

// Cuts the probe into batches of length-sorted samples (so each pads as little as
// possible), `batch_size` samples each, or AutoBatchSize per batch when it is 0.
std::vector<Batch> PlanBatches(const Probe& probe, const ModelShape& shape, int batch_size,
                               int64_t budget_bytes = kCpuBatchBudgetBytes);

// The tensors of one batch on `device`: token ids and validity [B, T] (right padding).
struct BatchTensors {
  at::Tensor ids;    // int64
  at::Tensor valid;  // bool
  int64_t valid_count = 0;
};
BatchTensors MakeBatchTensors(const Probe& probe, const Batch& batch, const at::Device& device);

}  // namespace anisoscope::analysis
