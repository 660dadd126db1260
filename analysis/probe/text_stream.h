// The leading token ids of a text file encoded as a whole, reading no more of the file than
// they need; used by BuildTextProbe's windows (text_probe.cc). Not part of the contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/tokenizer/tokenizer.h"

namespace anisoscope::analysis::internal {

// The first `count` ids (all of them if fewer) of tokenizer.Encode(text), where text is what
// Python's open(file).read() returns: the bytes of `in` with "\r\n" and a lone "\r" turned
// into "\n" (universal newlines), blank lines and whitespace kept. Reads and encodes growing
// prefixes of `in` (the first max(1 MiB, 8 bytes per id) long, then doubling), each encoded in
// one call and cut just after an ASCII letter or digit that is followed by ASCII whitespace:
// no pre-token of WordPiece or of byte-level BPE spans such a point, nor a piece of a
// SentencePiece-style vocabulary ("▁" only leads a piece), so the prefix's ids are exactly
// the leading ids of the whole text (assumed: no added token or vocabulary piece holds such
// a pair; the windows goldens check it for every tokenizer family).
// Read errors are left in `in`'s state; the tokenizer's error (tokenizer.h) is returned.
absl::StatusOr<std::vector<int64_t>> EncodeLeadingIds(std::istream& in, const Tokenizer& tokenizer,
                                                      size_t count);

}  // namespace anisoscope::analysis::internal
