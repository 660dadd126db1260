// The pickle interpreter alone (a torch.save data.pkl), storages served as zeros of the
// asked size (at most 1 Mi elements); every tensor read back.
#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "analysis/checkpoint/state_dict_unpickler.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anisoscope;
  const analysis::StorageLoader zeros = [](const std::string& /*key*/, at::ScalarType dtype,
                                           int64_t numel) -> absl::StatusOr<at::Tensor> {
    if (numel < 0 || numel > (int64_t{1} << 20)) {
      return absl::InvalidArgumentError("storage too large for the fuzzer");
    }
    return at::zeros({numel}, at::TensorOptions().dtype(dtype));
  };
  auto tensors = analysis::UnpickleStateDict(fuzz::AsText(data, size), "data.pkl", zeros);
  if (tensors.ok()) {
    for (const auto& [name, tensor] : *tensors) (void)tensor.sum().item<double>();
  }
  return 0;
}
