// The pieces of Hugging Face tokenizers' ByteLevel pre-tokenizer (GPT-2, GPT-NeoX, Qwen,
// LLaMA-3): GPT-2's split pattern, and the bytes_to_unicode mapping of each byte to a
// printable character; and the repair of invalid UTF-8 every BPE tokenizer does first.
// Pure functions; thread-safe; never fail.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace anisoscope::analysis::internal {

// Replaces every ill-formed UTF-8 sequence (maximal subpart) by U+FFFD, as Python's
// bytes.decode(errors="replace"); valid text is returned unchanged.
std::string SanitizeUtf8(std::string_view text);

// Length of the UTF-8 sequence that `lead` starts (1 for ASCII or a stray byte); for stepping
// through text that SanitizeUtf8 has made valid.
inline size_t Utf8SequenceLength(unsigned char lead) {
  return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

// The characters (code points) of valid UTF-8 `text`, as views into it.
std::vector<std::string_view> Utf8Characters(std::string_view text);

// GPT-2's split pattern, which ByteLevel with use_regex applies (for RegexSplitter, so with
// Oniguruma's \p{L}, \p{N} and \s = the White_Space property).
inline constexpr char kGpt2SplitPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's bytes_to_unicode(): the UTF-8 of the printable code point standing for each byte.
const std::array<std::string, 256>& ByteToUnicode();

// `bytes` with each byte replaced by ByteToUnicode() of it.
std::string BytesToUnicode(std::string_view bytes);

}  // namespace anisoscope::analysis::internal
