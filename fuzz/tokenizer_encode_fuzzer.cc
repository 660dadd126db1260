// Encoding arbitrary bytes with the real tokenizers of the repository: Qwen2.5 (NFC, a Split
// regex, byte-level BPE), Mistral (Prepend/Replace, byte fallback) and LLaMA's SentencePiece
// model converted to BPE. Each must return ids inside its vocabulary, whatever the bytes.
#include <cstdlib>
#include <memory>
#include <vector>

#include "analysis/tokenizer/bpe_tokenizer.h"
#include "fuzz/amplification_guard.h"
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

// Loaded once, before the first input: the fixed data no input's heap bound covers.
const std::vector<std::unique_ptr<BpeTokenizer>>& Tokenizers() {
  static const std::vector<std::unique_ptr<BpeTokenizer>> tokenizers = LoadTokenizers();
  return tokenizers;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  (void)Tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("tokenizer_encode_fuzzer", size);
  const std::string_view text = anisoscope::fuzz::AsText(data, size);
  for (const auto& tokenizer : Tokenizers()) {
    const absl::StatusOr<std::vector<int64_t>> ids = tokenizer->Encode(text);
    if (!ids.ok()) std::abort();  // real patterns stay far inside the regex budget
    for (const int64_t id : *ids) {
      if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
    }
  }
  return 0;
}
