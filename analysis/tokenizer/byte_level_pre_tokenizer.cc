#include "analysis/tokenizer/byte_level_pre_tokenizer.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <cstdint>

namespace anisoscope::analysis::internal {
namespace {

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

struct CodePoint {
  size_t offset;  // Byte offset in the text.
  UChar32 c;
  CharClass cls;
};

CharClass Classify(UChar32 c) {
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kLetter;
    if (c >= '0' && c <= '9') return CharClass::kNumber;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return CharClass::kSpace;
    return CharClass::kOther;
  }
  if (u_isUWhiteSpace(c)) return CharClass::kSpace;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::kLetter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

// Length in code points of the contraction ('s 't 're 've 'm 'll 'd) at cps[i], or 0.
size_t ContractionAt(const std::vector<CodePoint>& cps, size_t i) {
  const size_t n = cps.size() - 1;  // cps ends with a sentinel.
  if (cps[i].c != '\'' || i + 1 >= n) return 0;
  const UChar32 a = cps[i + 1].c;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= n) return 0;
  const UChar32 b = cps[i + 2].c;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

std::array<std::string, 256> MakeByteToUnicode() {
  std::array<std::string, 256> table;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const UChar32 c = printable ? b : next++;
    char buffer[4];
    int32_t length = 0;
    U8_APPEND_UNSAFE(buffer, length, c);
    table[b].assign(buffer, length);
  }
  return table;
}

}  // namespace

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  int32_t i = 0;
  // Fast path: nothing to copy while the text is valid.
  while (i < length) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c < 0) {
      out.reserve(text.size() + 8);
      out.assign(text.substr(0, start));
      out.append("\xEF\xBF\xBD");
      break;
    }
  }
  if (i >= length && out.empty()) return std::string(text);
  while (i < length) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c < 0) {
      out.append("\xEF\xBF\xBD");
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

std::vector<std::string_view> SplitGpt2Pattern(std::string_view text) {
  std::vector<CodePoint> cps;
  cps.reserve(text.size() + 1);
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    const auto offset = static_cast<size_t>(i);
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c < 0) c = 0xFFFD;
    cps.push_back({offset, c, Classify(c)});
  }
  const size_t n = cps.size();
  cps.push_back({text.size(), 0, CharClass::kOther});  // Sentinel: end of text.

  std::vector<std::string_view> pieces;
  auto emit = [&](size_t begin, size_t end) {
    pieces.push_back(text.substr(cps[begin].offset, cps[end].offset - cps[begin].offset));
  };
  auto run_end = [&](size_t from, CharClass cls) {
    while (from < n && cps[from].cls == cls) ++from;
    return from;
  };
  for (size_t i = 0; i < n;) {
    if (const size_t contraction = ContractionAt(cps, i); contraction > 0) {
      emit(i, i + contraction);
      i += contraction;
      continue;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a run.
    const size_t start = cps[i].c == ' ' ? i + 1 : i;
    if (start < n && cps[start].cls != CharClass::kSpace) {
      const size_t end = run_end(start, cps[start].cls);
      emit(i, end);
      i = end;
      continue;
    }
    // `\s+(?!\S)` leaves the last space of a run before text to that text; else `\s+`.
    const size_t end = run_end(i, CharClass::kSpace);
    const size_t stop = end == n || end - i == 1 ? end : end - 1;
    emit(i, stop);
    i = stop;
  }
  return pieces;
}

const std::array<std::string, 256>& ByteToUnicode() {
  static const std::array<std::string, 256>* const table =
      new std::array<std::string, 256>(MakeByteToUnicode());
  return *table;
}

std::string BytesToUnicode(std::string_view bytes) {
  const std::array<std::string, 256>& table = ByteToUnicode();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) out.append(table[static_cast<uint8_t>(b)]);
  return out;
}

}  // namespace anisoscope::analysis::internal
