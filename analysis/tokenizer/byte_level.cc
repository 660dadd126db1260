#include "analysis/tokenizer/byte_level.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstdint>

namespace anisoscope::analysis::internal {
namespace {

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


const std::array<std::string, 256>& ByteToUnicode() {
  static const std::array<std::string, 256>* const table =
      new std::array<std::string, 256>(MakeByteToUnicode());
  return *table;
}

std::vector<std::string_view> Utf8Characters(std::string_view text) {
  std::vector<std::string_view> characters;
  characters.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t length =
        std::min(Utf8SequenceLength(static_cast<unsigned char>(text[pos])), text.size() - pos);
    characters.push_back(text.substr(pos, length));
    pos += length;
  }
  return characters;
}

std::string BytesToUnicode(std::string_view bytes) {
  const std::array<std::string, 256>& table = ByteToUnicode();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) out.append(table[static_cast<uint8_t>(b)]);
  return out;
}

}  // namespace anisoscope::analysis::internal
