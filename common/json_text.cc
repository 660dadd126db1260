#include "common/json_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace anisoscope {

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (const unsigned char ch : text) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20) {
          out += absl::StrFormat("\\u%04x", ch);
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

std::string ShortestDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", value);
  if (std::isfinite(value) && std::strtod(text, nullptr) != value) {
    std::snprintf(text, sizeof(text), "%.17g", value);
  }
  return text;
}

}  // namespace anisoscope
