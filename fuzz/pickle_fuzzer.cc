// The pickle interpreter alone (a torch.save data.pkl), storages served as zeros of the
// asked size, at most the input's size in bytes in all (in a real file the storages are part
// of the file: amplification_guard.h bounds the heap by the input's size); every tensor read
// back.
#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "analysis/checkpoint/state_dict_unpickler.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("pickle_fuzzer", size);
  using namespace anisoscope;
  const int64_t file = static_cast<int64_t>(size);
  int64_t served = 0;
  const analysis::StorageLoader zeros = [file, &served](
                                            const std::string& /*key*/, at::ScalarType dtype,
                                            int64_t numel) -> absl::StatusOr<at::Tensor> {
    const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
    if (numel < 0 || numel > (file - served) / element) {
      return absl::InvalidArgumentError("storages larger than the file, for the fuzzer");
    }
    served += numel * element;
    return at::zeros({numel}, at::TensorOptions().dtype(dtype));
  };
  auto tensors = analysis::UnpickleStateDict(fuzz::AsText(data, size), "data.pkl", zeros);
  if (tensors.ok()) {
    for (const auto& [name, tensor] : *tensors) (void)tensor.sum().item<double>();
  }
  return 0;
}
