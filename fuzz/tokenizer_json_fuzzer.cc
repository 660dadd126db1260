// tokenizer.json: the reader (normalizers, pre-tokenizers with Split regexes compiled by
// Oniguruma, the post-processor, added tokens, the BPE model) and, when it loads, encoding
// a fixed text and the input itself (so that the input chooses both a pattern and the text
// it may backtrack on).
#include "analysis/tokenizer/bpe_tokenizer.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("tokenizer_json_fuzzer", size);
  using anisoscope::analysis::BpeTokenizer;
  const std::string_view input = anisoscope::fuzz::AsText(data, size);
  auto tokenizer = BpeTokenizer::FromTokenizerJson(
      anisoscope::fuzz::WriteInput(input, "tokenizer.json"), anisoscope::FileGate::Host());
  if (tokenizer.ok()) {
    (void)(*tokenizer)->Encode("Hello world, it's 2024!\n  \u00e9\u4f60\u597d <s> \xff");
    (void)(*tokenizer)->Encode(input);
  }
  return 0;
}
