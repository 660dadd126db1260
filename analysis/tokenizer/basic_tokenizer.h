// BasicTokenize: the first half of Hugging Face's BertTokenizer (its BasicTokenizer),
// turning text into words that WordPiece then splits further.
//
// Steps, as in transformers' slow tokenizer with tokenize_chinese_chars=True:
//   1. decode UTF-8 (invalid bytes become U+FFFD), drop U+0000, U+FFFD and category C*
//      except \t \n \r; whitespace (\t \n \r, Zs) becomes a space;
//   2. put spaces around CJK ideographs (the BERT code-point ranges);
//   3. split on whitespace; per word: NFC, and when `lower_case`, Python's str.lower()
//      (full case mapping, final sigma), NFD and dropping nonspacing marks (Mn);
//   4. split every punctuation character (P* or ASCII 33-47, 58-64, 91-96, 123-126) off
//      as its own word.
// Uses ICU for Unicode data. Pure function; thread-safe; never fails.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace anisoscope::analysis::internal {

// Words of `text` (UTF-8 in, UTF-8 out), none empty.
std::vector<std::string> BasicTokenize(std::string_view text, bool lower_case);

// Character classes of BERT's BasicTokenizer, exposed for tests.
bool IsBertWhitespace(char32_t c);
bool IsBertControl(char32_t c);
bool IsBertPunctuation(char32_t c);
bool IsBertCjk(char32_t c);

}  // namespace anisoscope::analysis::internal
