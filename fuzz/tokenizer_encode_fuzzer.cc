// Encoding arbitrary bytes with the real tokenizers of the repository: Qwen2.5 (NFC, a Split
// regex, byte-level BPE), Mistral (Prepend/Replace, byte fallback) and LLaMA's SentencePiece
// model converted to BPE. Each must return ids inside its vocabulary, whatever the bytes.
#include <cstdlib>
#include <memory>
#include <vector>

#include "analysis/tokenizer/bpe_tokenizer.h"
#include "fuzz/fuzz_input.h"

namespace {

using anisoscope::analysis::BpeTokenizer;

std::vector<std::unique_ptr<BpeTokenizer>> LoadTokenizers() {
  const std::filesystem::path dir = anisoscope::fuzz::RepoTokenizers();
  std::vector<std::unique_ptr<BpeTokenizer>> tokenizers;
  const auto add = [&tokenizers](absl::StatusOr<std::unique_ptr<BpeTokenizer>> loaded) {
    if (!loaded.ok()) std::abort();
    tokenizers.push_back(*std::move(loaded));
  };
  add(BpeTokenizer::FromTokenizerJson(dir / "qwen2_5" / "tokenizer.json",
                                      anisoscope::FileGate::Host()));
  add(BpeTokenizer::FromTokenizerJson(dir / "mistral" / "tokenizer.json",
                                      anisoscope::FileGate::Host()));
  add(BpeTokenizer::FromSentencePieceModel(dir / "llama" / "tokenizer.model",
                                           anisoscope::FileGate::Host()));
  return tokenizers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<BpeTokenizer>> tokenizers = LoadTokenizers();
  const std::string_view text = anisoscope::fuzz::AsText(data, size);
  for (const auto& tokenizer : tokenizers) {
    for (const int64_t id : tokenizer->Encode(text)) {
      if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
    }
  }
  return 0;
}
