// One line of a token-id probe file (a JSON array of non-negative integer ids), parsed byte by
// byte as it is read: neither the line nor a JSON tree of it is ever held, only the ids
// kept, so a line costs memory for `keep` ids whatever its length. Used by ReadTokenProbe
// (probe.cc); not part of the contract. Not thread-safe (reads `in`).
#pragma once

#include <cstdint>
#include <streambuf>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::analysis::internal {

struct TokenLine {
  enum class Kind {
    kEnd,      // no more input: nothing was read
    kBlank,    // ASCII whitespace only
    kIds,      // an array: `ids` holds its first `keep` ids, `count` all of them
    kTooLong,  // the line passed `max_bytes` bytes (without its '\n'): the rest is unread
  };
  Kind kind = Kind::kEnd;
  std::vector<int64_t> ids;
  int64_t count = 0;
};

// The next line of `in` (up to '\n' or the end, a trailing '\r' allowed), its first `keep`
// ids kept and the rest checked and counted. INVALID_ARGUMENT without a location (the caller
// names file and line) and without quoting the line: "not valid JSON (at byte N)",
// "expected a JSON array of token ids, got <type>", "empty array", "element I is not a
// non-negative integer" (a number past INT64_MAX, a fraction or exponent, -1, a string,
// ...). A non-array line is checked by nlohmann-json's acceptor (no tree), holding at most
// `max_bytes` bytes. `keep` >= 0, `max_bytes` >= 0.
absl::StatusOr<TokenLine> ReadTokenLine(std::streambuf& in, int64_t keep, int64_t max_bytes);

}  // namespace anisoscope::analysis::internal
