// No Abseil header may be included here (see sentencepiece_library.h).
#include "tests/analysis/tokenizer/sentencepiece_library.h"

#include <sentencepiece_processor.h>

#include <utility>

namespace anisoscope::analysis::spm_reference {

struct SentencePieceLibrary::Processor {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceLibrary::SentencePieceLibrary(std::unique_ptr<Processor> processor)
    : processor_(std::move(processor)) {}
SentencePieceLibrary::~SentencePieceLibrary() = default;

std::unique_ptr<SentencePieceLibrary> SentencePieceLibrary::Load(const std::string& file,
                                                             std::string* error) {
  auto processor = std::make_unique<Processor>();
  const sentencepiece::util::Status status = processor->processor.Load(file);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<SentencePieceLibrary>(new SentencePieceLibrary(std::move(processor)));
}

std::vector<int64_t> SentencePieceLibrary::Encode(std::string_view text) const {
  std::vector<int> ids;
  // Encode fails only on a processor without a model, which Load rules out.
  (void)processor_->processor.Encode(text, &ids);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

int SentencePieceLibrary::piece_count() const { return processor_->processor.GetPieceSize(); }
int SentencePieceLibrary::PieceId(const std::string& piece) const {
  // PieceToId answers unk's id for unknown pieces.
  const int id = processor_->processor.PieceToId(piece);
  return processor_->processor.IdToPiece(id) == piece ? id : -1;
}

int SentencePieceLibrary::bos_id() const { return processor_->processor.bos_id(); }
int SentencePieceLibrary::eos_id() const { return processor_->processor.eos_id(); }

}  // namespace anisoscope::analysis::spm_reference
