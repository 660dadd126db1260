#include "sources/listing/checkpoint_files.h"

#include "absl/strings/match.h"

namespace anisoscope::listing {
namespace {

// Configuration and tokenizer files, as transformers names them.
constexpr absl::string_view kSmallFiles[] = {"config.json",
                                             "generation_config.json",
                                             "tokenizer.json",
                                             "tokenizer_config.json",
                                             "special_tokens_map.json",
                                             "added_tokens.json",
                                             "vocab.txt",
                                             "vocab.json",
                                             "merges.txt",
                                             "tokenizer.model",
                                             "spiece.model",
                                             "sentencepiece.bpe.model"};

}  // namespace

bool IsWeightFile(absl::string_view path) {
  if (absl::StrContains(path, '/')) return false;
  if (absl::EndsWith(path, ".safetensors")) return true;
  // Only the loader's torch files: optimizer.bin, training_args.bin, rng_state.bin and the
  // like are not weights.
  return absl::StartsWith(path, "pytorch_model") && absl::EndsWith(path, ".bin");
}

bool IsCheckpointFile(absl::string_view path) {
  if (absl::StrContains(path, '/')) return false;
  if (IsWeightFile(path)) return true;
  if (path == "model.safetensors.index.json" || path == "pytorch_model.bin.index.json") {
    return true;
  }
  for (absl::string_view name : kSmallFiles) {
    if (path == name) return true;
  }
  return false;
}

}  // namespace anisoscope::listing
