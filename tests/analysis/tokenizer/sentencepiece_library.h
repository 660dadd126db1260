// SentencePieceLibrary: Debian's libsentencepiece behind an interface of standard types, the
// independent implementation the converted tokenizer.model is checked against (tests only:
// its bundled protobuf clashes with the libprotobuf LibTorch loads, see sentencepiece_model.h).
// Its header declares `namespace absl { using std::string_view; }`, which clashes with
// Abseil's own absl::string_view, so only sentencepiece_library.cc includes it and no Abseil
// header may be included there.
// Immutable after Load; Encode may be called from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace anisoscope::analysis::spm_reference {

class SentencePieceLibrary {
 public:
  // The model in `file` (a serialized ModelProto, e.g. LLaMA's tokenizer.model); null with
  // libsentencepiece's message in *error when it cannot be read or parsed.
  static std::unique_ptr<SentencePieceLibrary> Load(const std::string& file, std::string* error);
  ~SentencePieceLibrary();

  // Ids of `text` as SentencePieceProcessor::Encode gives them (no BOS or EOS).
  std::vector<int64_t> Encode(std::string_view text) const;
  int piece_count() const;
  // Id of the piece spelled `piece` ("<s>", "▁the"); -1 when there is none.
  int PieceId(const std::string& piece) const;
  // -1 when the model has none.
  int bos_id() const;
  int eos_id() const;

 private:
  struct Processor;
  explicit SentencePieceLibrary(std::unique_ptr<Processor> processor);

  std::unique_ptr<Processor> processor_;
};

}  // namespace anisoscope::analysis::spm_reference
