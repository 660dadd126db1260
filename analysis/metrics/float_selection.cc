#include "analysis/metrics/float_selection.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "analysis/metrics/float_selection_avx512.h"

namespace anisoscope::analysis {
namespace {

constexpr uint32_t kSignBit = 0x80000000u;

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Keys that order as the floats do: negatives have every bit flipped, the others only the
// sign bit.
uint32_t KeyOf(float value) {
  const uint32_t bits = BitsOf(value);
  return (bits & kSignBit) ? ~bits : bits | kSignBit;
}

// |x| is x with the sign bit cleared; its key sets that bit.
uint32_t AbsKeyOf(float value) { return BitsOf(value) | kSignBit; }

double ValueOf(uint32_t key) {
  const uint32_t bits = (key & kSignBit) ? key & ~kSignBit : ~key;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The k-th smallest (0-based) of keys[0 … n), which it reorders and overwrites; every key
// shares its bits from `top` up. Per step: a histogram of the next (up to) 8 bits, kept in
// four copies so that runs of equal digits do not wait on one counter, then only the keys
// of the bucket holding the k-th.
uint32_t SelectKey(uint32_t* keys, int64_t n, int64_t k, int top) {
  while (n > 1 && top > 0) {
    const int width = std::min(top, 8);
    const int shift = top - width;
    const uint32_t mask = (1u << width) - 1;
    uint32_t counts[4][256] = {};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int lane = 0; lane < 4; ++lane) ++counts[lane][(keys[i + lane] >> shift) & mask];
    }
    for (; i < n; ++i) ++counts[0][(keys[i] >> shift) & mask];
    uint32_t digit = 0;
    for (;; ++digit) {
      const int64_t count =
          int64_t{counts[0][digit]} + counts[1][digit] + counts[2][digit] + counts[3][digit];
      if (k < count) break;
      k -= count;
    }
    int64_t kept = 0;
    for (int64_t j = 0; j < n; ++j) {
      keys[kept] = keys[j];
      kept += ((keys[j] >> shift) & mask) == digit;
    }
    n = kept;
    top = shift;
  }
  return keys[0];
}

template <typename KeyFunction>
RowSummary RadixSummarize(const float* values, int64_t n, std::vector<uint32_t>& scratch,
                          KeyFunction key_of) {
  // scratch[0 … n) is selected in; scratch[n … 2n) keeps the keys for the upper middle one.
  if (static_cast<int64_t>(scratch.size()) < 2 * n) scratch.resize(static_cast<size_t>(2 * n));
  uint32_t* keys = scratch.data();
  uint32_t least = std::numeric_limits<uint32_t>::max(), greatest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t key = key_of(values[i]);
    keys[i] = keys[n + i] = key;
    least = std::min(least, key);
    greatest = std::max(greatest, key);
  }
  const int top = least == greatest ? 0 : 32 - __builtin_clz(least ^ greatest);
  const int64_t k = (n - 1) / 2;
  const uint32_t lower = SelectKey(keys, n, k, top);
  RowSummary summary{ValueOf(least), ValueOf(greatest), ValueOf(lower)};
  if (n % 2 == 1) return summary;
  // The upper middle key: the lower one again if it repeats past k, else the least above it.
  int64_t at_most = 0;
  uint32_t above = greatest;
  for (int64_t i = n; i < 2 * n; ++i) {
    at_most += keys[i] <= lower;
    above = keys[i] > lower ? std::min(above, keys[i]) : above;
  }
  const uint32_t upper = at_most >= k + 2 ? lower : above;
  summary.median = 0.5 * (summary.median + ValueOf(upper));
  return summary;
}

}  // namespace

RowSummary RadixSummarizeRow(const float* values, int64_t n, bool absolute,
                             SelectionScratch& scratch) {
  return absolute ? RadixSummarize(values, n, scratch.keys, AbsKeyOf)
                  : RadixSummarize(values, n, scratch.keys, KeyOf);
}

namespace {

RowSummary Summarize(const float* values, int64_t n, bool absolute, SelectionScratch& scratch) {
  if (Avx512SelectionAvailable()) {
    if (auto summary = Avx512SummarizeRow(values, n, absolute, scratch.values)) return *summary;
  }
  return RadixSummarizeRow(values, n, absolute, scratch);
}

}  // namespace

RowSummary SummarizeRow(const float* values, int64_t n, SelectionScratch& scratch) {
  return Summarize(values, n, /*absolute=*/false, scratch);
}

RowSummary SummarizeAbsRow(const float* values, int64_t n, SelectionScratch& scratch) {
  return Summarize(values, n, /*absolute=*/true, scratch);
}

}  // namespace anisoscope::analysis
