#include "analysis/probe/token_line.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis::internal {
namespace {

constexpr int kEol = -1;      // '\n' or the end of input
constexpr int kTooLong = -2;  // the line passed max_bytes

bool IsDigit(int c) { return c >= '0' && c <= '9'; }
bool IsJsonSpace(int c) { return c == ' ' || c == '\t' || c == '\r'; }

// The bytes of one line, one at a time, with one byte of lookahead (c()).
class LineScanner {
 public:
  LineScanner(std::streambuf& in, int64_t max_bytes) : in_(in), max_bytes_(max_bytes) {}

  // The current byte (0..255), kEol or kTooLong; both of those stay once reached.
  int c() const { return c_; }
  // Bytes of the line read so far, the current one included.
  int64_t bytes() const { return bytes_; }
  // Whether the input ended before the line's first byte.
  bool at_end() const { return at_end_; }

  void Advance() {
    if (c_ < 0 && started_) return;
    const bool first = !started_;
    started_ = true;
    const int next = in_.sbumpc();
    if (next == std::char_traits<char>::eof()) {
      at_end_ = first;
      c_ = kEol;
    } else if (next == '\n') {
      c_ = kEol;
    } else if (++bytes_ > max_bytes_) {
      c_ = kTooLong;
    } else {
      c_ = next;
    }
  }

  void SkipJsonSpace() {
    while (IsJsonSpace(c_)) Advance();
  }

 private:
  std::streambuf& in_;
  const int64_t max_bytes_;
  int64_t bytes_ = 0;
  int c_ = kEol;
  bool started_ = false;
  bool at_end_ = false;
};

TokenLine TooLong() {
  TokenLine line;
  line.kind = TokenLine::Kind::kTooLong;
  return line;
}

absl::Status NotJson(const LineScanner& scanner) {
  return absl::InvalidArgumentError(absl::StrCat("not valid JSON (at byte ", scanner.bytes(), ")"));
}

absl::Status NotAnId(int64_t element) {
  return absl::InvalidArgumentError(
      absl::StrCat("element ", element, " is not a non-negative integer"));
}

// A line that does not open an array: valid JSON of another type, or not JSON. The line is
// held (at most max_bytes) and checked without a tree.
absl::StatusOr<TokenLine> NonArray(LineScanner& scanner) {
  std::string text;
  for (; scanner.c() >= 0; scanner.Advance()) text.push_back(static_cast<char>(scanner.c()));
  if (scanner.c() == kTooLong) return TooLong();
  if (!nlohmann::json::accept(text)) return NotJson(scanner);
  const char first = text[0];  // not whitespace: the caller skipped it
  const char* type = first == '{'                   ? "object"
                     : first == '"'                 ? "string"
                     : first == 't' || first == 'f' ? "boolean"
                     : first == 'n'                 ? "null"
                                                    : "number";
  return absl::InvalidArgumentError(absl::StrCat("expected a JSON array of token ids, got ", type));
}

// One element at the scanner, `index` in its array: its id, or the error. Leaves the
// scanner after the element.
absl::StatusOr<int64_t> ParseId(LineScanner& scanner, int64_t index) {
  const bool negative = scanner.c() == '-';
  if (negative) scanner.Advance();
  const int first = scanner.c();
  if (!IsDigit(first)) {
    const bool other_value = !negative && (first == '"' || first == '[' || first == '{' ||
                                           first == 't' || first == 'f' || first == 'n');
    return other_value ? NotAnId(index) : NotJson(scanner);
  }
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  uint64_t value = 0;
  bool overflow = false;
  if (first == '0') {
    scanner.Advance();
    if (IsDigit(scanner.c())) return NotJson(scanner);  // a leading zero
  } else {
    for (; IsDigit(scanner.c()); scanner.Advance()) {
      const auto digit = static_cast<uint64_t>(scanner.c() - '0');
      if (value > (kMax - digit) / 10) overflow = true;
      if (!overflow) value = value * 10 + digit;
    }
  }
  const int after = scanner.c();
  if (after == '.' || after == 'e' || after == 'E' || overflow || (negative && value != 0)) {
    return NotAnId(index);
  }
  return static_cast<int64_t>(value);
}

}  // namespace

absl::StatusOr<TokenLine> ReadTokenLine(std::streambuf& in, int64_t keep, int64_t max_bytes) {
  LineScanner scanner(in, max_bytes);
  scanner.Advance();
  if (scanner.at_end()) return TokenLine{};
  bool bom = false;
  if (scanner.c() == 0xEF) {  // a UTF-8 byte order mark, skipped as nlohmann-json does
    for (const int expected : {0xBB, 0xBF}) {
      scanner.Advance();
      if (scanner.c() == kTooLong) return TooLong();
      if (scanner.c() != expected) return NotJson(scanner);
    }
    scanner.Advance();
    bom = true;
  }
  bool odd_space = false;  // \v or \f: blank, but not JSON whitespace
  for (; IsJsonSpace(scanner.c()) || scanner.c() == '\v' || scanner.c() == '\f';
       scanner.Advance()) {
    odd_space = odd_space || !IsJsonSpace(scanner.c());
  }
  if (scanner.c() == kTooLong) return TooLong();
  if (scanner.c() == kEol) {
    if (bom) return NotJson(scanner);
    TokenLine blank;
    blank.kind = TokenLine::Kind::kBlank;
    return blank;
  }
  if (odd_space) return NotJson(scanner);
  if (scanner.c() != '[') return NonArray(scanner);

  TokenLine line;
  line.kind = TokenLine::Kind::kIds;
  const auto fail = [&scanner](absl::Status status) -> absl::StatusOr<TokenLine> {
    if (scanner.c() == kTooLong) return TooLong();
    return status;
  };
  scanner.Advance();
  scanner.SkipJsonSpace();
  if (scanner.c() == ']') return absl::InvalidArgumentError("empty array");
  while (true) {
    absl::StatusOr<int64_t> id = ParseId(scanner, line.count);
    if (!id.ok()) return fail(id.status());
    if (line.count < keep) line.ids.push_back(*id);
    ++line.count;
    scanner.SkipJsonSpace();
    if (scanner.c() == ']') break;
    if (scanner.c() != ',') return fail(NotJson(scanner));
    scanner.Advance();
    scanner.SkipJsonSpace();
  }
  scanner.Advance();
  scanner.SkipJsonSpace();
  if (scanner.c() != kEol) return fail(NotJson(scanner));
  return line;
}

}  // namespace anisoscope::analysis::internal
