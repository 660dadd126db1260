#include "analysis/probe/checkpoint_tokenizer.h"

#include <initializer_list>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/tokenizer/bpe_files.h"
#include "analysis/tokenizer/bpe_tokenizer.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

// model.type of a tokenizer.json; errors name the file.
absl::StatusOr<std::string> ModelTypeOf(const fs::path& tokenizer_json, const FileGate& gate) {
  ASSIGN_OR_RETURN(const std::string text,
                   internal::ReadTokenizerFile(tokenizer_json, "tokenizer.json", gate));
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
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

// tokenizer_config.json of `checkpoint_dir` as JSON; null when absent or malformed (then
// Hugging Face's defaults apply).
nlohmann::json ReadTokenizerConfig(const fs::path& checkpoint_dir, const FileGate& gate) {
  const absl::StatusOr<std::string> text = internal::ReadTokenizerFile(
      checkpoint_dir / "tokenizer_config.json", "tokenizer_config.json", gate);
  if (!text.ok()) return nullptr;
  nlohmann::json config = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return config.is_object() ? config : nullptr;
}

// The content of tokenizer_config.json's `key` ("<s>" or {"content": "<s>", ...}).
std::optional<std::string> SpecialTokenContent(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const nlohmann::json& token = config[key];
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string()) {
    return token["content"].get<std::string>();
  }
  return std::nullopt;
}

// BOS (prefix) or EOS (suffix) of `framing` as tokenizer_config.json's add_<which>_token
// says, when it says: the id of its <which>_token, found by `token_id`.
absl::Status ApplyAddSpecialToken(const nlohmann::json& config, const fs::path& checkpoint_dir,
                                  const char* which, const BpeTokenizer& tokenizer,
                                  std::vector<int64_t>* ids) {
  const std::string add_key = absl::StrCat("add_", which, "_token");
  if (!config.is_object() || !config.contains(add_key) || !config[add_key].is_boolean()) {
    return absl::OkStatus();
  }
  ids->clear();
  if (!config[add_key].get<bool>()) return absl::OkStatus();
  const std::string token_key = absl::StrCat(which, "_token");
  const std::optional<std::string> content = SpecialTokenContent(config, token_key.c_str());
  const std::optional<int64_t> id = content ? tokenizer.TokenId(*content) : std::nullopt;
  if (!id) {
    return absl::InvalidArgumentError(absl::StrCat(
        (checkpoint_dir / "tokenizer_config.json").string(), ": field '", add_key,
        "' is true but '", token_key, "' ",
        content ? absl::StrCat("(\"", *content, "\") is not a token of the tokenizer")
                : "is missing"));
  }
  ids->push_back(*id);
  return absl::OkStatus();
}

// The special tokens `tokenizer` declares around a text, as tokenizer_config.json adjusts them.
absl::StatusOr<SampleFraming> FramingOf(const fs::path& checkpoint_dir,
                                        const BpeTokenizer& tokenizer, const FileGate& gate) {
  SampleFraming framing{tokenizer.prefix_ids(), tokenizer.suffix_ids()};
  const nlohmann::json config = ReadTokenizerConfig(checkpoint_dir, gate);
  RETURN_IF_ERROR(ApplyAddSpecialToken(config, checkpoint_dir, "bos", tokenizer, &framing.prefix));
  RETURN_IF_ERROR(ApplyAddSpecialToken(config, checkpoint_dir, "eos", tokenizer, &framing.suffix));
  return framing;
}

// A loaded BPE tokenizer with the framing FramingOf gives it.
absl::StatusOr<CheckpointTokenizer> FramedBpe(const fs::path& checkpoint_dir,
                                              absl::StatusOr<std::unique_ptr<BpeTokenizer>> loaded,
                                              std::string description, const FileGate& gate) {
  if (!loaded.ok()) return loaded.status();
  CheckpointTokenizer result;
  ASSIGN_OR_RETURN(result.framing, FramingOf(checkpoint_dir, **loaded, gate));
  result.tokenizer = *std::move(loaded);
  result.description = std::move(description);
  return result;
}

}  // namespace

WordPieceTokenizer::Options WordPieceOptionsOf(const fs::path& checkpoint_dir,
                                               const nlohmann::json& config, const FileGate& gate) {
  WordPieceTokenizer::Options options;
  const nlohmann::json tokenizer_config = ReadTokenizerConfig(checkpoint_dir, gate);
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
                                                            const nlohmann::json& config,
                                                            const FileGate& gate) {
  const auto IsFile = [&gate](const fs::path& path) { return gate.IsFile(path); };
  CheckpointTokenizer result;
  const fs::path vocab_txt = checkpoint_dir / "vocab.txt";
  if (IsFile(vocab_txt)) {
    ASSIGN_OR_RETURN(std::unique_ptr<WordPieceTokenizer> wordpiece,
                     WordPieceTokenizer::Create(
                         vocab_txt, WordPieceOptionsOf(checkpoint_dir, config, gate), gate));
    result.framing = BertFraming(*wordpiece);
    result.tokenizer = std::move(wordpiece);
    result.description = absl::StrCat("WordPiece from ", vocab_txt.string());
    return result;
  }
  const fs::path tokenizer_json = checkpoint_dir / "tokenizer.json";
  std::string other_model;
  if (IsFile(tokenizer_json)) {
    ASSIGN_OR_RETURN(const std::string type, ModelTypeOf(tokenizer_json, gate));
    if (type == "BPE") {
      return FramedBpe(checkpoint_dir, BpeTokenizer::FromTokenizerJson(tokenizer_json, gate),
                       absl::StrCat("BPE from ", tokenizer_json.string()), gate);
    }
    other_model = absl::StrCat(" (tokenizer.json has model.type '", type, "', not BPE)");
  }
  const fs::path tokenizer_model = checkpoint_dir / "tokenizer.model";
  if (IsFile(tokenizer_model)) {
    return FramedBpe(checkpoint_dir, BpeTokenizer::FromSentencePieceModel(tokenizer_model, gate),
                     absl::StrCat("SentencePiece BPE from ", tokenizer_model.string()), gate);
  }
  const fs::path vocab_json = checkpoint_dir / "vocab.json";
  const fs::path merges_txt = checkpoint_dir / "merges.txt";
  if (IsFile(vocab_json) && IsFile(merges_txt)) {
    ASSIGN_OR_RETURN(result.tokenizer,
                     BpeTokenizer::FromVocabAndMerges(vocab_json, merges_txt, gate));
    result.description =
        absl::StrCat("byte-level BPE from ", vocab_json.string(), " + ", merges_txt.string());
    return result;
  }
  return absl::NotFoundError(absl::StrCat(
      "checkpoint directory ", checkpoint_dir.string(),
      " has no tokenizer for a text probe: looked for vocab.txt (WordPiece), tokenizer.json "
      "with model.type BPE, tokenizer.model (SentencePiece), and vocab.json + merges.txt "
      "(byte-level BPE)",
      other_model,
      IsFile(vocab_json) != IsFile(merges_txt)
          ? absl::StrCat("; found only ", IsFile(vocab_json) ? "vocab.json" : "merges.txt")
          : ""));
}

}  // namespace anisoscope::analysis
