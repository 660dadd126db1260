#include "analysis/tokenizer/wordpiece_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/tokenizer/basic_tokenizer.h"
#include "analysis/tokenizer/bpe_files.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr char kContinuationPrefix[] = "##";

}  // namespace

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::Create(
    const std::filesystem::path& vocab_file, const Options& options, const FileGate& gate) {
  if (options.max_input_chars_per_word <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_input_chars_per_word must be positive, got ", options.max_input_chars_per_word));
  }
  ASSIGN_OR_RETURN(const std::string text,
                   internal::ReadTokenizerFile(vocab_file, "vocab file", gate));

  auto tokenizer = std::unique_ptr<WordPieceTokenizer>(new WordPieceTokenizer());
  tokenizer->options_ = options;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    const size_t next = end == std::string::npos ? text.size() : end + 1;
    if (end == std::string::npos) end = text.size();
    std::string token = text.substr(pos, end - pos);
    if (!token.empty() && token.back() == '\r') token.pop_back();
    const auto id = static_cast<int64_t>(tokenizer->id_to_token_.size());
    // As HF's load_vocab: a repeated token keeps its last line.
    tokenizer->token_to_id_[token] = id;
    tokenizer->max_token_bytes_ = std::max(tokenizer->max_token_bytes_, token.size());
    tokenizer->id_to_token_.push_back(std::move(token));
    pos = next;
  }
  if (tokenizer->id_to_token_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("vocab file is empty: ", vocab_file.string()));
  }
  const std::pair<const char*, int64_t*> specials[] = {
      {"[CLS]", &tokenizer->cls_id_},
      {"[SEP]", &tokenizer->sep_id_},
      {"[PAD]", &tokenizer->pad_id_},
      {"[UNK]", &tokenizer->unk_id_},
  };
  for (const auto& [name, id] : specials) {
    auto it = tokenizer->token_to_id_.find(name);
    if (it == tokenizer->token_to_id_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocab file ", vocab_file.string(), " has no ", name, " token"));
    }
    *id = it->second;
  }
  return tokenizer;
}

absl::StatusOr<std::vector<int64_t>> WordPieceTokenizer::Encode(std::string_view text) const {
  std::vector<int64_t> ids;
  Run(text, &ids, nullptr);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::Tokenize(std::string_view text) const {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;
  Run(text, &ids, &tokens);
  return tokens;
}

void WordPieceTokenizer::Run(std::string_view text, std::vector<int64_t>* ids,
                             std::vector<std::string>* tokens) const {
  for (const std::string& word : internal::BasicTokenize(text, options_.lower_case)) {
    AppendWordPieces(word, ids, tokens);
  }
}

void WordPieceTokenizer::AppendWordPieces(const std::string& word, std::vector<int64_t>* ids,
                                          std::vector<std::string>* tokens) const {
  // Byte offset of every code point, then the end (words are valid UTF-8).
  std::vector<size_t> bounds;
  bounds.reserve(word.size() + 1);
  for (size_t i = 0; i < word.size(); ++i) {
    if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) bounds.push_back(i);
  }
  bounds.push_back(word.size());
  const size_t num_chars = bounds.size() - 1;
  const size_t ids_before = ids->size();
  const size_t tokens_before = tokens ? tokens->size() : 0;
  auto append_unk = [&] {
    ids->resize(ids_before);
    ids->push_back(unk_id_);
    if (tokens) {
      tokens->resize(tokens_before);
      tokens->push_back(id_to_token_[unk_id_]);
    }
  };
  if (num_chars > static_cast<size_t>(options_.max_input_chars_per_word)) {
    append_unk();
    return;
  }
  std::string candidate;
  for (size_t start = 0; start < num_chars;) {
    const size_t prefix = start > 0 ? sizeof(kContinuationPrefix) - 1 : 0;
    size_t end = num_chars;
    while (end > start && bounds[end] - bounds[start] + prefix > max_token_bytes_) --end;
    int64_t found = -1;
    for (; end > start; --end) {
      candidate.assign(prefix > 0 ? kContinuationPrefix : "");
      candidate.append(word, bounds[start], bounds[end] - bounds[start]);
      auto it = token_to_id_.find(candidate);
      if (it != token_to_id_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      append_unk();
      return;
    }
    ids->push_back(found);
    if (tokens) tokens->push_back(candidate);
    start = end;
  }
}

}  // namespace anisoscope::analysis
