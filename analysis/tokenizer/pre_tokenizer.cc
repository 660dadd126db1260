#include "analysis/tokenizer/pre_tokenizer.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "analysis/tokenizer/byte_level.h"

namespace anisoscope::analysis::internal {
namespace {

using Kind = PreTokenizerStep::Kind;

// Metaspace: spaces become the replacement, prepended as the scheme says; split before each
// replacement (tokenizers' MergedWithNext) when asked.
void ApplyMetaspace(const PreTokenizerStep& step, std::string_view piece, bool starts_text,
                    std::vector<std::string>* out) {
  std::string text = absl::StrReplaceAll(absl::string_view(piece.data(), piece.size()),
                                         {{" ", step.replacement}});
  const bool prepend = step.prepend == PreTokenizerStep::Prepend::kAlways ||
                       (step.prepend == PreTokenizerStep::Prepend::kFirst && starts_text);
  if (prepend && text.compare(0, step.replacement.size(), step.replacement) != 0) {
    text.insert(0, step.replacement);
  }
  if (!step.split) {
    out->push_back(std::move(text));
    return;
  }
  size_t word_start = 0;
  for (size_t pos = text.find(step.replacement, 1); pos != std::string::npos;
       pos = text.find(step.replacement, pos + step.replacement.size())) {
    if (pos > word_start) out->push_back(text.substr(word_start, pos - word_start));
    word_start = pos;
  }
  if (word_start < text.size()) out->push_back(text.substr(word_start));
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::Create(const std::vector<PreTokenizerStep>& steps) {
  static const std::shared_ptr<const RegexSplitter> gpt2 = [] {
    absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter =
        RegexSplitter::Create(kGpt2SplitPattern);
    return std::shared_ptr<const RegexSplitter>(std::move(splitter).value());
  }();
  PreTokenizer pre_tokenizer;
  for (size_t i = 0; i < steps.size(); ++i) {
    Step step{steps[i], nullptr};
    if (step.config.kind == Kind::kSplit) {
      absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter =
          RegexSplitter::Create(step.config.pattern);
      if (!splitter.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer step ", i, " (Split): ",
                                                       splitter.status().message()));
      }
      step.splitter = *std::move(splitter);
    } else if (step.config.kind == Kind::kByteLevel && step.config.use_regex) {
      step.splitter = gpt2;
    }
    pre_tokenizer.steps_.push_back(std::move(step));
  }
  return pre_tokenizer;
}

bool PreTokenizer::byte_level() const {
  return !steps_.empty() && steps_.back().config.kind == Kind::kByteLevel;
}

absl::StatusOr<std::vector<std::string>> PreTokenizer::Split(std::string_view piece,
                                                             bool starts_text,
                                                             RegexBudget* budget) const {
  std::vector<std::string> words{std::string(piece)};
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    next.reserve(words.size());
    for (size_t w = 0; w < words.size(); ++w) {
      std::string& word = words[w];
      switch (step.config.kind) {
        case Kind::kMetaspace:
          ApplyMetaspace(step.config, word, starts_text && w == 0, &next);
          continue;
        case Kind::kByteLevel:
          if (step.config.add_prefix_space && (word.empty() || word.front() != ' ')) {
            word.insert(0, " ");
          }
          if (step.splitter == nullptr) {
            next.push_back(std::move(word));
            continue;
          }
          break;
        case Kind::kSplit:
          break;
      }
      absl::StatusOr<std::vector<std::string_view>> parts = step.splitter->Split(word, budget);
      if (!parts.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("field '", step.config.field.empty() ? "pre_tokenizer" : step.config.field,
                         step.config.kind == Kind::kSplit ? ".pattern' (Split): "
                                                          : "' (ByteLevel's GPT-2 pattern): ",
                         parts.status().message()));
      }
      for (const std::string_view part : *parts) next.emplace_back(part);
    }
    words = std::move(next);
  }
  return words;
}

}  // namespace anisoscope::analysis::internal
