#include "analysis/tokenizer/added_tokens.h"

#include <algorithm>
#include <utility>

namespace anisoscope::analysis::internal {

AddedTokens::AddedTokens(std::vector<Token> tokens) {
  for (Token& token : tokens) {
    if (!token.content.empty()) tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
  }
  for (std::vector<size_t>& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [this](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

std::vector<AddedTokens::Segment> AddedTokens::Split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t pending = 0;  // Start of the text not yet emitted.
  for (size_t pos = 0; pos < text.size();) {
    const Token* match = nullptr;
    if (!tokens_.empty()) {
      for (const size_t index : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
        if (text.compare(pos, tokens_[index].content.size(), tokens_[index].content) == 0) {
          match = &tokens_[index];
          break;
        }
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    if (pos > pending) segments.push_back({text.substr(pending, pos - pending), -1});
    segments.push_back({text.substr(pos, match->content.size()), match->id});
    pos += match->content.size();
    pending = pos;
  }
  if (text.size() > pending) segments.push_back({text.substr(pending), -1});
  return segments;
}

}  // namespace anisoscope::analysis::internal
