// Token-id probes (JSON lines of ids) and the step names of checkpoint directories.
#include "analysis/checkpoint/step_discovery.h"
#include "analysis/probe/probe.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("token_probe_fuzzer", size);
  using namespace anisoscope;
  const std::string_view input = fuzz::AsText(data, size);
  (void)analysis::ReadTokenProbe(fuzz::WriteInput(input, "probe.jsonl"), 128, 512,
                                 anisoscope::FileGate::Host());
  (void)analysis::ParseStep(input.substr(0, 256));
  return 0;
}
