// WordPiece's vocab.txt and GPT-2's vocab.json + merges.txt (the input split at its first
// NUL byte), and, when they load, encoding.
#include "analysis/tokenizer/bpe_tokenizer.h"
#include "analysis/tokenizer/wordpiece_tokenizer.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("vocab_files_fuzzer", size);
  using namespace anisoscope;
  const std::string_view input = fuzz::AsText(data, size);
  constexpr char kText[] = "Hello, world! unaffable \u00e9t\u00e9 \u4f60\u597d [SEP] <|endoftext|>";
  auto wordpiece = analysis::WordPieceTokenizer::Create(fuzz::WriteInput(input, "vocab.txt"), {},
                                                        anisoscope::FileGate::Host());
  if (wordpiece.ok()) (void)(*wordpiece)->Encode(kText);
  const size_t nul = input.find('\0');
  const std::string_view vocab = input.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? "" : input.substr(nul + 1);
  auto bpe = analysis::BpeTokenizer::FromVocabAndMerges(fuzz::WriteInput(vocab, "vocab.json"),
                                                        fuzz::WriteInput(merges, "merges.txt"),
                                                        anisoscope::FileGate::Host());
  if (bpe.ok()) (void)(*bpe)->Encode(kText);
  return 0;
}
