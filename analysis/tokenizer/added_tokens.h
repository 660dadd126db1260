// AddedTokens: Hugging Face tokenizers' added-token matching. Before the model sees the
// text, every occurrence of an added token's content is split out as that token, the
// leftmost match first and the longest on ties (its aho-corasick LeftmostLongest).
// Immutable after construction; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace anisoscope::analysis::internal {

class AddedTokens {
 public:
  struct Token {
    std::string content;
    int64_t id = -1;
  };
  // A piece of text: an added token (id >= 0) or text for the model (id == -1).
  struct Segment {
    std::string_view text;
    int64_t id = -1;
  };

  AddedTokens() = default;
  // Tokens with empty content are ignored (they match nothing in HF either).
  explicit AddedTokens(std::vector<Token> tokens);

  // Splits `text` (valid UTF-8) into consecutive segments; no empty text segment.
  std::vector<Segment> Split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<Token> tokens_;
  // Indices into tokens_ by first byte, longest content first.
  std::array<std::vector<size_t>, 256> by_first_byte_;
};

}  // namespace anisoscope::analysis::internal
