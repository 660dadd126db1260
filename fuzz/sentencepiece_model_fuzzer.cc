// tokenizer.model: the protobuf reader and the conversion to BPE (merges from the pieces),
// and, when it loads, encoding.
#include "analysis/tokenizer/bpe_tokenizer.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("sentencepiece_model_fuzzer", size);
  using anisoscope::analysis::BpeTokenizer;
  auto tokenizer = BpeTokenizer::FromSentencePieceModel(
      anisoscope::fuzz::WriteInput(anisoscope::fuzz::AsText(data, size), "tokenizer.model"),
      anisoscope::FileGate::Host());
  if (tokenizer.ok()) (void)(*tokenizer)->Encode("Hello world\n\t\u00e9\u4f60 <s>ab");
  return 0;
}
