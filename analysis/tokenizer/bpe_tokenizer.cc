#include "analysis/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/tokenizer/byte_level.h"
#include "analysis/tokenizer/sentencepiece_model.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromTokenizerJson(
    const std::filesystem::path& tokenizer_json, const FileGate& gate) {
  ASSIGN_OR_RETURN(internal::BpeConfig config, internal::ReadTokenizerJson(tokenizer_json, gate));
  return FromConfig(std::move(config));
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromSentencePieceModel(
    const std::filesystem::path& tokenizer_model, const FileGate& gate) {
  ASSIGN_OR_RETURN(internal::BpeConfig config,
                   internal::ReadSentencePieceModel(tokenizer_model, gate));
  return FromConfig(std::move(config));
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromVocabAndMerges(
    const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
    const FileGate& gate) {
  ASSIGN_OR_RETURN(internal::BpeConfig config,
                   internal::ReadVocabAndMerges(vocab_json, merges_txt, gate));
  return FromConfig(std::move(config));
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromConfig(
    internal::BpeConfig config) {
  auto tokenizer = std::unique_ptr<BpeTokenizer>(new BpeTokenizer());
  tokenizer->normalizer_ = internal::TextNormalizer(std::move(config.normalizer));
  absl::StatusOr<internal::PreTokenizer> pre_tokenizer =
      internal::PreTokenizer::Create(config.pre_tokenizer);
  if (!pre_tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": pre_tokenizer: ", pre_tokenizer.status().message()));
  }
  tokenizer->pre_tokenizer_ = *std::move(pre_tokenizer);
  tokenizer->source_ = config.source;
  tokenizer->prefix_ids_ = std::move(config.prefix_ids);
  tokenizer->suffix_ids_ = std::move(config.suffix_ids);

  internal::BpeModel::Options model_options;
  model_options.ignore_merges = config.ignore_merges;
  model_options.byte_fallback = config.byte_fallback;
  model_options.fuse_unk = config.fuse_unk;
  if (config.unk_token) {
    auto it = config.vocab.find(*config.unk_token);
    if (it == config.vocab.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          config.source, ": model.unk_token \"", *config.unk_token, "\" is not in the vocabulary"));
    }
    model_options.unk_id = it->second;
  }
  absl::StatusOr<std::unique_ptr<internal::BpeModel>> model =
      internal::BpeModel::Create(std::move(config.vocab), config.merges, model_options);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": model.merges: ", model.status().message()));
  }
  tokenizer->model_ = *std::move(model);
  tokenizer->vocab_size_ = tokenizer->model_->vocab_size();

  // As tokenizers' AddedVocabulary: the contents of normalized tokens are normalized too.
  for (internal::AddedTokens::Token& token : config.normalized_added) {
    token.content = tokenizer->normalizer_.Normalize(token.content);
  }
  for (const auto* list : {&config.raw_added, &config.normalized_added}) {
    for (const internal::AddedTokens::Token& token : *list) {
      tokenizer->vocab_size_ = std::max(tokenizer->vocab_size_, token.id + 1);
      tokenizer->all_added_.push_back(token);
    }
  }
  tokenizer->raw_added_ = internal::AddedTokens(std::move(config.raw_added));
  tokenizer->normalized_added_ = internal::AddedTokens(std::move(config.normalized_added));
  return tokenizer;
}

std::optional<int64_t> BpeTokenizer::TokenId(std::string_view token) const {
  for (const internal::AddedTokens::Token& added : all_added_) {
    if (added.content == token) return added.id;
  }
  return model_->TokenId(token);
}

absl::StatusOr<std::vector<int64_t>> BpeTokenizer::Encode(std::string_view text) const {
  const std::string valid = internal::SanitizeUtf8(text);
  internal::RegexBudget budget = internal::RegexBudget::ForText(valid.size());
  std::vector<int64_t> ids;
  ids.reserve(valid.size() / 3 + 4);
  for (const internal::AddedTokens::Segment& segment : raw_added_.Split(valid)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      absl::Status encoded =
          EncodeNormalizable(segment.text, segment.text.data() == valid.data(), &budget, &ids);
      if (!encoded.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(source_, ": ", encoded.message()));
      }
    }
  }
  return ids;
}

absl::Status BpeTokenizer::EncodeNormalizable(std::string_view text, bool starts_text,
                                              internal::RegexBudget* budget,
                                              std::vector<int64_t>* ids) const {
  const std::string normalized = normalizer_.Normalize(text);
  const bool byte_level = pre_tokenizer_.byte_level();
  for (const internal::AddedTokens::Segment& segment : normalized_added_.Split(normalized)) {
    if (segment.id >= 0) {
      ids->push_back(segment.id);
      continue;
    }
    const bool segment_starts_text = starts_text && segment.text.data() == normalized.data();
    ASSIGN_OR_RETURN(const std::vector<std::string> words,
                     pre_tokenizer_.Split(segment.text, segment_starts_text, budget));
    for (const std::string& word : words) {
      if (byte_level) {
        model_->EncodeByteLevelWord(word, ids);
      } else {
        model_->EncodeWord(word, ids);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace anisoscope::analysis
