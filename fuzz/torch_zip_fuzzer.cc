// pytorch_model.bin as torch.save writes it: the zip directory, data.pkl through the
// non-executing pickle interpreter, the storages it names; every tensor read back. The zip's
// CRCs are not checked, so mutations inside data.pkl reach the interpreter.
#include <ATen/ATen.h>

#include "analysis/checkpoint/torch_zip_reader.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("torch_zip_fuzzer", size);
  using namespace anisoscope;
  auto tensors = analysis::ReadTorchZipStateDict(
      fuzz::WriteInput(fuzz::AsText(data, size), "pytorch_model.bin"),
      anisoscope::FileGate::Host());
  if (tensors.ok()) {
    for (const auto& [name, tensor] : *tensors) (void)tensor.sum().item<double>();
  }
  return 0;
}
