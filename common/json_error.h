// What a JSON error says without quoting the text it read: nlohmann's parse errors end in
// "last read: '…'", bytes of the file, which no error may carry. Header-only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"

namespace anisoscope {

// "malformed JSON at byte N" for a parse error, "a number out of range" for one (its text
// quotes the number); the library's message otherwise (type and key errors name fields).
inline std::string JsonErrorText(const nlohmann::json::exception& error) {
  if (const auto* parse = dynamic_cast<const nlohmann::json::parse_error*>(&error)) {
    return absl::StrCat("malformed JSON at byte ", parse->byte);
  }
  if (dynamic_cast<const nlohmann::json::out_of_range*>(&error) != nullptr) {
    return "malformed JSON: a number out of range";
  }
  return error.what();
}

}  // namespace anisoscope
