#include "analysis/tokenizer/byte_level_bpe_tokenizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/tokenizer/byte_level_pre_tokenizer.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

using internal::Normalization;

const icu::Normalizer2* NormalizerOf(Normalization normalization) {
  UErrorCode status = U_ZERO_ERROR;
  switch (normalization) {
    case Normalization::kNone:
      return nullptr;
    case Normalization::kNfc:
      return icu::Normalizer2::getNFCInstance(status);
    case Normalization::kNfd:
      return icu::Normalizer2::getNFDInstance(status);
    case Normalization::kNfkc:
      return icu::Normalizer2::getNFKCInstance(status);
    case Normalization::kNfkd:
      return icu::Normalizer2::getNFKDInstance(status);
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> ByteLevelBpeTokenizer::FromTokenizerJson(
    const std::filesystem::path& tokenizer_json) {
  ASSIGN_OR_RETURN(internal::ByteLevelBpeConfig config,
                   internal::ReadTokenizerJson(tokenizer_json));
  return FromConfig(std::move(config));
}

absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> ByteLevelBpeTokenizer::FromVocabAndMerges(
    const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) {
  ASSIGN_OR_RETURN(internal::ByteLevelBpeConfig config,
                   internal::ReadVocabAndMerges(vocab_json, merges_txt));
  return FromConfig(std::move(config));
}

absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> ByteLevelBpeTokenizer::FromConfig(
    internal::ByteLevelBpeConfig config) {
  auto tokenizer = std::unique_ptr<ByteLevelBpeTokenizer>(new ByteLevelBpeTokenizer());
  tokenizer->normalization_ = config.normalization;
  tokenizer->add_prefix_space_ = config.add_prefix_space;
  tokenizer->use_regex_ = config.use_regex;

  internal::BpeModel::Options model_options;
  model_options.ignore_merges = config.ignore_merges;
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
    token.content = tokenizer->Normalize(token.content);
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

std::optional<int64_t> ByteLevelBpeTokenizer::TokenId(std::string_view token) const {
  for (const internal::AddedTokens::Token& added : all_added_) {
    if (added.content == token) return added.id;
  }
  return model_->TokenId(token);
}

std::vector<int64_t> ByteLevelBpeTokenizer::Encode(std::string_view text) const {
  const std::string valid = internal::SanitizeUtf8(text);
  std::vector<int64_t> ids;
  ids.reserve(valid.size() / 3 + 4);
  for (const internal::AddedTokens::Segment& segment : raw_added_.Split(valid)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      EncodeNormalizable(segment.text, &ids);
    }
  }
  return ids;
}

void ByteLevelBpeTokenizer::EncodeNormalizable(std::string_view text,
                                               std::vector<int64_t>* ids) const {
  const std::string normalized = Normalize(text);
  for (const internal::AddedTokens::Segment& segment : normalized_added_.Split(normalized)) {
    if (segment.id >= 0) {
      ids->push_back(segment.id);
    } else {
      EncodePiece(segment.text, ids);
    }
  }
}

void ByteLevelBpeTokenizer::EncodePiece(std::string_view piece, std::vector<int64_t>* ids) const {
  std::string prefixed;
  if (add_prefix_space_ && (piece.empty() || piece.front() != ' ')) {
    prefixed.reserve(piece.size() + 1);
    prefixed.append(" ").append(piece);
    piece = prefixed;
  }
  if (!use_regex_) {
    model_->EncodeWord(piece, ids);
    return;
  }
  for (const std::string_view word : internal::SplitGpt2Pattern(piece)) {
    model_->EncodeWord(word, ids);
  }
}

std::string ByteLevelBpeTokenizer::Normalize(std::string_view text) const {
  const icu::Normalizer2* normalizer = NormalizerOf(normalization_);
  if (normalizer == nullptr) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece input(text.data(), static_cast<int32_t>(text.size()));
  if (normalizer->isNormalizedUTF8(input, status) && U_SUCCESS(status)) {
    return std::string(text);
  }
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  status = U_ZERO_ERROR;
  normalizer->normalizeUTF8(0, input, sink, nullptr, status);
  // The input is valid UTF-8, so ICU does not fail; keep the text if it ever does.
  return U_SUCCESS(status) ? out : std::string(text);
}

}  // namespace anisoscope::analysis
