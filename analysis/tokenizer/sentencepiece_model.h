// Reader of a SentencePiece tokenizer.model (a serialized sentencepiece ModelProto: LLaMA,
// LLaMA-2, Mistral, TinyLlama, Amber) into the BPE tokenizer Hugging Face's LlamaConverter
// makes of it: every piece a vocabulary token, merges from every split of a piece into two
// pieces ordered by the piece's score (highest first), byte fallback, unk fused, "▁" for
// spaces and before the text, the control pieces (<s>, </s>) and user-defined ones added
// tokens, <s> before every text. BpeTokenizer runs the result; libsentencepiece gives the
// same ids (tests/analysis/tokenizer checks it on every golden text and on WikiText), but it
// cannot be linked into the engine: Debian's libsentencepiece carries its own protobuf, whose
// exported symbols replace those of the libprotobuf that LibTorch and gRPC load (a crash
// while loading the process). Only BPE models with the identity normalizer are accepted.
// Blocks on the file read; thread-safe.
#pragma once

#include <filesystem>

#include "absl/status/statusor.h"
#include "analysis/tokenizer/bpe_files.h"
#include "common/file_gate.h"

namespace anisoscope::analysis::internal {

// NOT_FOUND for a missing file; INVALID_ARGUMENT naming the file and the field for bytes that
// are not a ModelProto, a Unigram (or word, char) model, a normalizer other than identity,
// remove_extra_whitespaces, or special ids outside the pieces.
absl::StatusOr<BpeConfig> ReadSentencePieceModel(const std::filesystem::path& file,
                                                 const FileGate& gate);

}  // namespace anisoscope::analysis::internal
