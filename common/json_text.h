// JSON text helpers shared by the HTTP API and the CLI's JSON output. Pure; thread-safe.
// Strings are escaped by nlohmann-json (the one escaper); a double that is not finite is
// written as protobuf's JSON mapping writes it, the strings "NaN", "Infinity" and
// "-Infinity" (the HTTP API's answers and `anisoscope ... --format json` alike).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace anisoscope {

// `text` as a JSON string literal, quotes included: escapes ", \ and the control characters;
// other bytes, UTF-8 included, are kept as they are (a byte that is not UTF-8 becomes
// U+FFFD).
std::string JsonQuote(std::string_view text);

// The shortest of %.15g and %.17g that reads back as `value` (protobuf's SimpleDtoa, what
// its JSON printer writes); "nan", "inf" or "-inf" for non-finite values.
std::string ShortestDouble(double value);

// "NaN", "Infinity" or "-Infinity" for a value that is not finite; nullptr for one that is.
const char* NonFiniteName(double value);

// `value` as JSON text: ShortestDouble when finite, else NonFiniteName in quotes.
std::string JsonDoubleText(double value);

// `value` as a JSON value: a number when finite, else the string NonFiniteName.
nlohmann::ordered_json JsonDouble(double value);

}  // namespace anisoscope
