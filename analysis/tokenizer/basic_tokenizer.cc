#include "analysis/tokenizer/basic_tokenizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf16.h>

#include <cstdint>

namespace anisoscope::analysis::internal {
namespace {

// Decodes the code point at s[*pos] and advances *pos; -1 for an ill-formed sequence
// (overlong, surrogate, out of range or truncated), of which it consumes the maximal
// ill-formed prefix, as the Unicode "U+FFFD substitution of maximal subparts" practice.
int32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<uint8_t>(s[*pos]);
  if (b0 < 0x80) {
    ++*pos;
    return b0;
  }
  int trail = 0;
  uint32_t cp = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    trail = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    trail = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    trail = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    ++*pos;
    return -1;
  }
  size_t p = *pos + 1;
  for (int k = 0; k < trail; ++k, ++p) {
    if (p >= s.size()) {
      *pos = p;
      return -1;
    }
    const auto b = static_cast<uint8_t>(s[p]);
    if (b < lo || b > hi) {
      *pos = p;
      return -1;
    }
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  *pos = p;
  return static_cast<int32_t>(cp);
}

void AppendUtf8(UChar32 c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// What Python's str.split() still splits on after cleaning (Zs and \t\n\r became ' ').
bool IsSplitSpace(UChar32 c) { return c == ' ' || c == 0x2028 || c == 0x2029; }

// NFC, then (uncased) Python-style lower-casing, NFD and dropping Mn, of one word.
void NormalizeWord(const UChar32* begin, const UChar32* end, bool lower_case,
                   std::vector<UChar32>* out) {
  out->clear();
  bool ascii = true;
  for (const UChar32* p = begin; p != end; ++p) ascii = ascii && *p < 0x80;
  if (ascii) {
    for (const UChar32* p = begin; p != end; ++p) {
      out->push_back(lower_case && *p >= 'A' && *p <= 'Z' ? *p + ('a' - 'A') : *p);
    }
    return;
  }
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(error);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(error);
  icu::UnicodeString word = icu::UnicodeString::fromUTF32(begin, static_cast<int32_t>(end - begin));
  if (U_SUCCESS(error)) word = nfc->normalize(word, error);
  if (lower_case) {
    // Full case mapping with the Final_Sigma context, as Python's str.lower().
    word.toLower(icu::Locale::getRoot());
    if (U_SUCCESS(error)) word = nfd->normalize(word, error);
  }
  if (U_FAILURE(error)) {
    out->assign(begin, end);
    return;
  }
  const char16_t* units = word.getBuffer();
  const int32_t length = word.length();
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U16_NEXT(units, i, length, c);
    if (lower_case && u_charType(c) == U_NON_SPACING_MARK) continue;
    out->push_back(c);
  }
}

// Appends the pieces of a normalized word, each punctuation character on its own.
void SplitOnPunctuation(const std::vector<UChar32>& word, std::vector<std::string>* out) {
  std::string current;
  for (const UChar32 c : word) {
    if (IsBertPunctuation(static_cast<char32_t>(c))) {
      if (!current.empty()) out->push_back(std::move(current));
      current.clear();
      std::string punct;
      AppendUtf8(c, &punct);
      out->push_back(std::move(punct));
    } else {
      AppendUtf8(c, &current);
    }
  }
  if (!current.empty()) out->push_back(std::move(current));
}

}  // namespace

bool IsBertWhitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  return u_charType(static_cast<UChar32>(c)) == U_SPACE_SEPARATOR;
}

bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:         // Cc
    case U_FORMAT_CHAR:          // Cf
    case U_SURROGATE:            // Cs
    case U_PRIVATE_USE_CHAR:     // Co
    case U_GENERAL_OTHER_TYPES:  // Cn (unassigned)
      return true;
    default:
      return false;
  }
}

bool IsBertPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  return u_ispunct(static_cast<UChar32>(c));
}

bool IsBertCjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::vector<std::string> BasicTokenize(std::string_view text, bool lower_case) {
  // Clean, map whitespace to ' ' and isolate CJK ideographs.
  std::vector<UChar32> cleaned;
  cleaned.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) {
    const int32_t c = NextCodePoint(text, &pos);
    if (c <= 0 || c == 0xFFFD) continue;
    const auto c32 = static_cast<char32_t>(c);
    if (IsBertControl(c32)) continue;
    if (IsBertWhitespace(c32)) {
      cleaned.push_back(' ');
    } else if (IsBertCjk(c32)) {
      cleaned.push_back(' ');
      cleaned.push_back(c);
      cleaned.push_back(' ');
    } else {
      cleaned.push_back(c);
    }
  }
  // Split on whitespace, normalize each word, split off punctuation.
  std::vector<std::string> words;
  std::vector<UChar32> normalized;
  const UChar32* data = cleaned.data();
  const size_t n = cleaned.size();
  for (size_t i = 0; i < n;) {
    while (i < n && IsSplitSpace(data[i])) ++i;
    const size_t start = i;
    while (i < n && !IsSplitSpace(data[i])) ++i;
    if (i == start) continue;
    NormalizeWord(data + start, data + i, lower_case, &normalized);
    SplitOnPunctuation(normalized, &words);
  }
  return words;
}

}  // namespace anisoscope::analysis::internal
