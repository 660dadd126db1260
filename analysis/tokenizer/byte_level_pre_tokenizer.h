// The byte-level pre-tokenizer of GPT-2 and GPT-NeoX (Hugging Face tokenizers' ByteLevel):
// the GPT-2 split pattern, matched by hand on ICU character classes, and the
// bytes_to_unicode mapping of each byte to a printable character. Pure functions;
// thread-safe; never fail.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace anisoscope::analysis::internal {

// Replaces every ill-formed UTF-8 sequence (maximal subpart) by U+FFFD, as Python's
// bytes.decode(errors="replace"); valid text is returned unchanged.
std::string SanitizeUtf8(std::string_view text);

// Splits valid UTF-8 `text` as the regex (Oniguruma semantics, case-sensitive)
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \p{L} = Lu Ll Lt Lm Lo, \p{N} = Nd Nl No and \s = the White_Space property.
// The pieces are views into `text` and concatenate back to it.
std::vector<std::string_view> SplitGpt2Pattern(std::string_view text);

// GPT-2's bytes_to_unicode(): the UTF-8 of the printable code point standing for each byte.
const std::array<std::string, 256>& ByteToUnicode();

// `bytes` with each byte replaced by ByteToUnicode() of it.
std::string BytesToUnicode(std::string_view bytes);

}  // namespace anisoscope::analysis::internal
