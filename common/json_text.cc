#include "common/json_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace anisoscope {

std::string JsonQuote(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::string ShortestDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", value);
  if (std::isfinite(value) && std::strtod(text, nullptr) != value) {
    std::snprintf(text, sizeof(text), "%.17g", value);
  }
  return text;
}

const char* NonFiniteName(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return nullptr;
}

std::string JsonDoubleText(double value) {
  const char* name = NonFiniteName(value);
  return name == nullptr ? ShortestDouble(value) : absl::StrCat("\"", name, "\"");
}

nlohmann::ordered_json JsonDouble(double value) {
  const char* name = NonFiniteName(value);
  return name == nullptr ? nlohmann::ordered_json(value) : nlohmann::ordered_json(name);
}

}  // namespace anisoscope
