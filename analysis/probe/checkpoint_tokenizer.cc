#include "analysis/probe/checkpoint_tokenizer.h"

#include <fstream>
#include <initializer_list>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/tokenizer/byte_level_bpe_tokenizer.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// model.type of a tokenizer.json; errors name the file.
absl::StatusOr<std::string> ModelTypeOf(const fs::path& tokenizer_json) {
  std::ifstream in(tokenizer_json, std::ios::binary);
  const nlohmann::json root = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokenizer_json.string(), ": malformed JSON (cannot tell the model type)"));
  }
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object() ||
      !root["model"].contains("type") || !root["model"]["type"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokenizer_json.string(), ": field 'model.type' is missing"));
  }
  return root["model"]["type"].get<std::string>();
}

}  // namespace

WordPieceTokenizer::Options WordPieceOptionsOf(const fs::path& checkpoint_dir,
                                               const nlohmann::json& config) {
  WordPieceTokenizer::Options options;
  nlohmann::json tokenizer_config;
  std::ifstream in(checkpoint_dir / "tokenizer_config.json");
  if (in) tokenizer_config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  for (const nlohmann::json* source :
       std::initializer_list<const nlohmann::json*>{&tokenizer_config, &config}) {
    if (source->is_object() && source->contains("do_lower_case") &&
        (*source)["do_lower_case"].is_boolean()) {
      options.lower_case = (*source)["do_lower_case"].get<bool>();
      break;
    }
  }
  return options;
}

absl::StatusOr<CheckpointTokenizer> LoadCheckpointTokenizer(const fs::path& checkpoint_dir,
                                                            const nlohmann::json& config) {
  CheckpointTokenizer result;
  const fs::path vocab_txt = checkpoint_dir / "vocab.txt";
  if (IsFile(vocab_txt)) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<WordPieceTokenizer> wordpiece,
        WordPieceTokenizer::Create(vocab_txt, WordPieceOptionsOf(checkpoint_dir, config)));
    result.framing = BertFraming(*wordpiece);
    result.tokenizer = std::move(wordpiece);
    result.description = absl::StrCat("WordPiece from ", vocab_txt.string());
    return result;
  }
  const fs::path tokenizer_json = checkpoint_dir / "tokenizer.json";
  std::string other_model;
  if (IsFile(tokenizer_json)) {
    ASSIGN_OR_RETURN(const std::string type, ModelTypeOf(tokenizer_json));
    if (type == "BPE") {
      ASSIGN_OR_RETURN(result.tokenizer, ByteLevelBpeTokenizer::FromTokenizerJson(tokenizer_json));
      result.description = absl::StrCat("byte-level BPE from ", tokenizer_json.string());
      return result;
    }
    other_model = absl::StrCat(" (tokenizer.json has model.type '", type, "', not BPE)");
  }
  const fs::path vocab_json = checkpoint_dir / "vocab.json";
  const fs::path merges_txt = checkpoint_dir / "merges.txt";
  if (IsFile(vocab_json) && IsFile(merges_txt)) {
    ASSIGN_OR_RETURN(result.tokenizer,
                     ByteLevelBpeTokenizer::FromVocabAndMerges(vocab_json, merges_txt));
    result.description =
        absl::StrCat("byte-level BPE from ", vocab_json.string(), " + ", merges_txt.string());
    return result;
  }
  return absl::NotFoundError(absl::StrCat(
      "checkpoint directory ", checkpoint_dir.string(),
      " has no tokenizer for a text probe: looked for vocab.txt (WordPiece), tokenizer.json "
      "with model.type BPE, and vocab.json + merges.txt (byte-level BPE)",
      other_model,
      IsFile(vocab_json) != IsFile(merges_txt)
          ? absl::StrCat("; found only ", IsFile(vocab_json) ? "vocab.json" : "merges.txt")
          : ""));
}

}  // namespace anisoscope::analysis
