// The tokenizer a checkpoint directory ships, chosen from its files, and the framing of
// its text samples. Used by the extractor's BuildProbe; no LibTorch.
//
// Choice, first match wins (Hugging Face's AutoTokenizer also prefers tokenizer.json to
// tokenizer.model):
//   1. vocab.txt                       -> WordPiece, [CLS] … [SEP] (BERT, MultiBERTs);
//   2. tokenizer.json, model.type BPE  -> BPE (Pythia, Qwen, OLMo-2, LLaMA-3 byte-level;
//                                         LLaMA-2, Mistral byte fallback), framed as its
//                                         post_processor declares (<s> … for LLaMA-2);
//   3. tokenizer.model                 -> SentencePiece BPE (LLaMA, Amber, TinyLlama),
//                                         converted as LlamaConverter does, <s> …;
//   4. vocab.json + merges.txt         -> byte-level BPE, no special tokens (GPT-2, CRFM);
//   else NOT_FOUND naming the directory and the files looked for.
// tokenizer_config.json's add_bos_token / add_eos_token, where present, decide the BOS / EOS
// of 2 and 3 (as transformers' LlamaTokenizer and GPTNeoXTokenizerFast rebuild their
// post-processor from them; LlamaTokenizer's defaults are BOS yes, EOS no).
// Blocks on file reads; thread-safe (no shared state).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/probe/probe.h"
#include "analysis/tokenizer/tokenizer.h"
#include "analysis/tokenizer/wordpiece_tokenizer.h"
#include "common/file_gate.h"
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
// Every file is read through `gate`.
absl::StatusOr<CheckpointTokenizer> LoadCheckpointTokenizer(
    const std::filesystem::path& checkpoint_dir, const nlohmann::json& config,
    const FileGate& gate);

// WordPiece casing from tokenizer_config.json (where Hugging Face keeps it), else
// config.json, else uncased (MultiBERTs, bert-base-uncased).
WordPieceTokenizer::Options WordPieceOptionsOf(const std::filesystem::path& checkpoint_dir,
                                               const nlohmann::json& config, const FileGate& gate);

}  // namespace anisoscope::analysis
