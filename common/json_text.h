// JSON text helpers shared by the HTTP API and the CLI's JSON output. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace anisoscope {

// `text` as a JSON string literal, quotes included: escapes ", \, \n, \r, \t and the other
// control characters (\u00XX); other bytes, UTF-8 included, are kept as they are.
std::string JsonQuote(std::string_view text);

// The shortest of %.15g and %.17g that reads back as `value` (protobuf's SimpleDtoa, what
// its JSON printer writes); "nan", "inf" or "-inf" for non-finite values.
std::string ShortestDouble(double value);

}  // namespace anisoscope
