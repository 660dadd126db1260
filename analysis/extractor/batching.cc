#include "analysis/extractor/batching.h"

#include <algorithm>
#include <numeric>

#include "analysis/extractor/device_memory.h"

namespace anisoscope::analysis {

int64_t BatchBudgetBytes(const at::Device& device, uint64_t checkpoint_bytes) {
  constexpr int64_t kCpuFloor = int64_t{4} << 20;
  constexpr int64_t kCpuCeiling = int64_t{256} << 20;
  constexpr int64_t kCudaFloor = int64_t{32} << 20;
  constexpr int64_t kCudaCeiling = int64_t{2} << 30;
  if (device.is_cuda()) {
    return std::clamp<int64_t>(FreeMemoryBytes(device) / 8, kCudaFloor, kCudaCeiling);
  }
  return std::clamp<int64_t>(static_cast<int64_t>(checkpoint_bytes / 32), kCpuFloor, kCpuCeiling);
}

int AutoBatchSize(const ModelShape& shape, int64_t length, int64_t budget_bytes) {
  const int64_t budget_elements = budget_bytes / 4;
  constexpr int64_t kMaxBatch = 256;
  const int64_t per_sample =
      std::max<int64_t>(int64_t{shape.num_heads} * length, 4 * int64_t{shape.hidden_size}) *
      std::max<int64_t>(length, 1);
  return static_cast<int>(std::clamp<int64_t>(budget_elements / per_sample, 1, kMaxBatch));
}

std::vector<Batch> PlanBatches(const Probe& probe, const ModelShape& shape, int batch_size,
                               int64_t budget_bytes) {
  std::vector<size_t> order(probe.samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return probe.samples[a].size() > probe.samples[b].size();
  });
  std::vector<Batch> batches;
  for (size_t first = 0; first < order.size();) {
    Batch batch;
    batch.length = static_cast<int64_t>(probe.samples[order[first]].size());
    const size_t size =
        batch_size > 0 ? batch_size : AutoBatchSize(shape, batch.length, budget_bytes);
    const size_t last = std::min(order.size(), first + size);
    batch.samples.assign(order.begin() + first, order.begin() + last);
    batches.push_back(std::move(batch));
    first = last;
  }
  return batches;
}

BatchTensors MakeBatchTensors(const Probe& probe, const Batch& batch, const at::Device& device) {
  const int64_t rows = static_cast<int64_t>(batch.samples.size());
  BatchTensors tensors;
  tensors.ids = at::zeros({rows, batch.length}, at::kLong);
  tensors.valid = at::zeros({rows, batch.length}, at::kBool);
  for (int64_t row = 0; row < rows; ++row) {
    const std::vector<int64_t>& sample = probe.samples[batch.samples[row]];
    const int64_t n = static_cast<int64_t>(sample.size());
    tensors.ids[row].narrow(0, 0, n).copy_(at::tensor(sample, at::kLong));
    tensors.valid[row].narrow(0, 0, n).fill_(true);
    tensors.valid_count += n;
  }
  tensors.ids = tensors.ids.to(device);
  tensors.valid = tensors.valid.to(device);
  return tensors;
}

}  // namespace anisoscope::analysis
