// config.json against real tiny weights: the input's first byte picks a family whose weights
// fuzz/make_seeds.py wrote ($ANISOSCOPE_FUZZ_WEIGHTS/<family>/), the rest is config.json;
// the checkpoint is loaded and its model built (every config field checked against the
// weights), then run on three tokens.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/transformer_model.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

namespace {

namespace fs = std::filesystem;

class NullObserver : public anisoscope::analysis::ForwardObserver {
 public:
  void OnHiddenState(int, const at::Tensor&) override {}
  void OnAttention(int, const at::Tensor&, const at::Tensor&, const at::Tensor&) override {}
};

// One directory per family: its weight files linked, config.json written per input.
std::vector<fs::path> FamilyDirectories() {
  const char* weights = std::getenv("ANISOSCOPE_FUZZ_WEIGHTS");
  if (weights == nullptr) std::abort();
  std::vector<fs::path> dirs;
  for (const char* family : {"gpt_neox", "gpt2", "llama", "olmo2"}) {
    const fs::path dir = anisoscope::fuzz::InputDirectory() / family;
    fs::create_directories(dir);
    for (const fs::directory_entry& file : fs::directory_iterator(fs::path(weights) / family)) {
      if (file.path().filename() == "config.json") continue;
      if (!fs::exists(dir / file.path().filename())) {
        fs::create_symlink(file.path(), dir / file.path().filename());
      }
    }
    dirs.push_back(dir);
  }
  return dirs;
}

// Made once, before the first input (amplification_guard.h bounds what each input adds).
const std::vector<fs::path>& Directories() {
  static const std::vector<fs::path> dirs = FamilyDirectories();
  return dirs;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  (void)Directories();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("model_config_fuzzer", size);
  using namespace anisoscope;
  const std::vector<fs::path>& dirs = Directories();
  if (size == 0) return 0;
  const fs::path& dir = dirs[data[0] % dirs.size()];
  fuzz::WriteInput(fuzz::AsText(data + 1, size - 1), (dir.filename() / "config.json").string());
  auto checkpoint = analysis::Checkpoint::Load(dir, anisoscope::FileGate::Host());
  if (!checkpoint.ok()) return 0;
  auto model = analysis::CreateModel(*checkpoint, analysis::ModelOptions());
  if (!model.ok()) return 0;
  c10::InferenceMode inference;
  const int64_t vocab = (*model)->shape().vocab_size;
  const at::Tensor ids = at::arange(3, at::kLong).remainder(std::max<int64_t>(vocab, 1));
  NullObserver observer;
  try {
    (*model)->Forward(ids.view({1, 3}), at::ones({1, 3}, at::kBool), observer);
  } catch (const c10::Error&) {
    // LibTorch's own failures are the extractor's to catch and report, as here.
  }
  return 0;
}
