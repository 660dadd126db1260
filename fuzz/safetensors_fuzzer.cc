// model.safetensors: the header (JSON: dtypes, shapes, data offsets) checked against the
// file; every tensor's bytes read back.
#include <ATen/ATen.h>

#include "analysis/checkpoint/safetensors_reader.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("safetensors_fuzzer", size);
  using namespace anisoscope;
  auto tensors =
      analysis::ReadSafetensors(fuzz::WriteInput(fuzz::AsText(data, size), "model.safetensors"),
                                anisoscope::FileGate::Host());
  if (tensors.ok()) {
    for (const auto& [name, tensor] : *tensors) (void)tensor.sum().item<double>();
  }
  return 0;
}
