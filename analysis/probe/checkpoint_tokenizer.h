// The tokenizer a checkpoint directory ships, chosen from its files, and the framing of
// its text samples. Used by the extractor's BuildProbe; no LibTorch.
//
// Choice, first match wins:
//   1. vocab.txt                       -> WordPiece, [CLS] … [SEP] (BERT, MultiBERTs);
//   2. tokenizer.json, model.type BPE  -> byte-level BPE, no special tokens (Pythia);
//   3. vocab.json + merges.txt         -> byte-level BPE, no special tokens (GPT-2, CRFM);
//   else NOT_FOUND naming the directory and the files looked for.
// Blocks on file reads; thread-safe (no shared state).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/probe/probe.h"
#include "analysis/tokenizer/tokenizer.h"
#include "analysis/tokenizer/wordpiece_tokenizer.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis {

struct CheckpointTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  // Special tokens around each text sample.
  SampleFraming framing;
  // What was chosen, e.g. "byte-level BPE from <dir>/tokenizer.json".
  std::string description;
};

// `config` is the checkpoint's parsed config.json (for do_lower_case).
absl::StatusOr<CheckpointTokenizer> LoadCheckpointTokenizer(
    const std::filesystem::path& checkpoint_dir, const nlohmann::json& config);

// WordPiece casing from tokenizer_config.json (where Hugging Face keeps it), else
// config.json, else uncased (MultiBERTs, bert-base-uncased).
WordPieceTokenizer::Options WordPieceOptionsOf(const std::filesystem::path& checkpoint_dir,
                                               const nlohmann::json& config);

}  // namespace anisoscope::analysis
