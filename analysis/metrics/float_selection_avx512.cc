#include "analysis/metrics/float_selection_avx512.h"

#include <algorithm>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#define ANISOSCOPE_AVX512 __attribute__((target("avx512f,popcnt")))
#endif

namespace anisoscope::analysis {

#if defined(__x86_64__)
namespace {

// Values ranked per round to bracket the wanted rank, and how many sample ranks the bracket
// reaches to each side (chosen by timing softmax rows of 512 and 768: a wider bracket keeps
// more values per round, a narrower one misses the rank more often, which costs one more
// pass).
constexpr int kSampleSize = 16;
constexpr int kBracketReach = 2;
// Rows this short are ranked in lanes directly (two vectors).
constexpr int64_t kRankedDirectly = 32;
// Rounds after which the rest is left to std::nth_element: a row of 768 takes 3 to 5; only
// ties that let every bracket hold nearly all of the row take more.
constexpr int kMostRounds = 12;

ANISOSCOPE_AVX512 __mmask16 LanesLeft(int64_t remaining) {
  return remaining >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << remaining) - 1);
}

ANISOSCOPE_AVX512 int Count(__mmask16 lanes) { return __builtin_popcount(lanes); }

// The least (kLeast) or greatest lane; _mm512_reduce_min_ps would do it, but GCC 12 warns
// about its undefined upper half once inlined.
template <bool kLeast>
ANISOSCOPE_AVX512 float Reduce(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return kLeast ? *std::min_element(lanes, lanes + 16) : *std::max_element(lanes, lanes + 16);
}

// The values of rank r0 and r1 (0-based, in sorted order) of values[0 … m), m <= 32: lane i
// counts the values below and at most values[i], and holds every rank between.
ANISOSCOPE_AVX512 void RankInLanes(const float* values, int64_t m, int64_t r0, int64_t r1,
                                   float* value0, float* value1) {
  const __mmask16 lanes[2] = {LanesLeft(m), LanesLeft(std::max<int64_t>(m - 16, 0))};
  const __m512 v[2] = {_mm512_maskz_loadu_ps(lanes[0], values),
                       _mm512_maskz_loadu_ps(lanes[1], values + 16)};
  const __m512i one = _mm512_set1_epi32(1);
  __m512i below[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  __m512i at_most[2] = {below[0], below[1]};
  for (int64_t j = 0; j < m; ++j) {
    const __m512 other = _mm512_set1_ps(values[j]);
    for (int half = 0; half < 2; ++half) {
      below[half] = _mm512_mask_add_epi32(
          below[half], _mm512_cmp_ps_mask(v[half], other, _CMP_GT_OQ), below[half], one);
      at_most[half] = _mm512_mask_add_epi32(
          at_most[half], _mm512_cmp_ps_mask(v[half], other, _CMP_GE_OQ), at_most[half], one);
    }
  }
  const auto holding = [&](int64_t rank) ANISOSCOPE_AVX512 {
    const __m512i r = _mm512_set1_epi32(static_cast<int>(rank));
    for (int half = 0; half < 2; ++half) {
      const __mmask16 found = _mm512_mask_cmple_epi32_mask(lanes[half], below[half], r) &
                              _mm512_cmpgt_epi32_mask(at_most[half], r);
      if (found) return values[16 * half + __builtin_ctz(found)];
    }
    __builtin_unreachable();  // every rank < m is held by some lane
  };
  *value0 = holding(r0);
  *value1 = holding(r1);
}

// Writes the values of values[0 … m) that compare with `bound` as kPredicate says to out
// (which has 16 floats of room past m); returns their count.
template <int kPredicate>
ANISOSCOPE_AVX512 int64_t Keep(const float* values, int64_t m, __m512 bound, float* out) {
  int64_t kept = 0;
  for (int64_t i = 0; i < m; i += 16) {
    const __mmask16 lanes = LanesLeft(m - i);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, values + i);
    const __mmask16 keep = _mm512_mask_cmp_ps_mask(lanes, v, bound, kPredicate);
    // A compress into a register and a full store: a compressing store is microcoded on AMD.
    _mm512_storeu_ps(out + kept, _mm512_maskz_compress_ps(keep, v));
    kept += Count(keep);
  }
  return kept;
}

// The value of rank k of values[0 … m), by std::nth_element on a copy in `out`.
float SelectByNthElement(const float* values, int64_t m, int64_t k, float* out) {
  std::copy(values, values + m, out);
  std::nth_element(out, out + k, out + m);
  return out[k];
}

// The value of rank k of values[0 … n) (no NaN). `a` and `b` hold n + 16 floats each.
ANISOSCOPE_AVX512 float Select(const float* values, int64_t n, int64_t k, float* a, float* b) {
  const float* current = values;
  int64_t m = n;
  float* out = a;
  for (int round = 0; m > kRankedDirectly; ++round) {
    if (round == kMostRounds) return SelectByNthElement(current, m, k, out);
    float sample[kSampleSize];
    for (int j = 0; j < kSampleSize; ++j) sample[j] = current[j * m / kSampleSize];
    const int64_t expected = k * kSampleSize / m;
    float low, high;
    RankInLanes(sample, kSampleSize, std::max<int64_t>(expected - kBracketReach, 0),
                std::min<int64_t>(expected + kBracketReach, kSampleSize - 1), &low, &high);
    const __m512 low_bound = _mm512_set1_ps(low), high_bound = _mm512_set1_ps(high);
    // One pass: count below `low` and at most `high`, keep what lies between.
    int64_t below = 0, at_most = 0, kept = 0;
    for (int64_t i = 0; i < m; i += 16) {
      const __mmask16 lanes = LanesLeft(m - i);
      const __m512 v = _mm512_maskz_loadu_ps(lanes, current + i);
      const __mmask16 under = _mm512_mask_cmp_ps_mask(lanes, v, low_bound, _CMP_LT_OQ);
      const __mmask16 not_over = _mm512_mask_cmp_ps_mask(lanes, v, high_bound, _CMP_LE_OQ);
      const __mmask16 within = not_over & static_cast<__mmask16>(~under);
      _mm512_storeu_ps(out + kept, _mm512_maskz_compress_ps(within, v));
      kept += Count(within);
      below += Count(under);
      at_most += Count(not_over);
    }
    if (k < below) {  // the bracket missed low: keep what lies below it (`low` is not kept)
      kept = Keep<_CMP_LT_OQ>(current, m, low_bound, out);
    } else if (k >= at_most) {  // missed high: keep what lies above it
      kept = Keep<_CMP_GT_OQ>(current, m, high_bound, out);
      k -= at_most;
    } else {
      if (low == high) return low;
      k -= below;
      // Both bounds are the extremes (ties): bracketing makes no progress.
      if (kept == m) return SelectByNthElement(current, m, k, out);
    }
    m = kept;
    current = out;
    out = out == a ? b : a;
  }
  float value, unused;
  RankInLanes(current, m, k, k, &value, &unused);
  return value;
}

template <bool kAbsolute>
ANISOSCOPE_AVX512 std::optional<RowSummary> Summarize(const float* values, int64_t n,
                                                      std::vector<float>& scratch) {
  if (static_cast<int64_t>(scratch.size()) < 3 * n + 48) {
    scratch.resize(static_cast<size_t>(3 * n + 48));
  }
  float* const first = scratch.data();
  float* const second = first + n + 16;
  float* const absolute = second + n + 16;
  const float inf = std::numeric_limits<float>::infinity();
  __m512 least = _mm512_set1_ps(inf), greatest = _mm512_set1_ps(-inf);
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = LanesLeft(n - i);
    __m512 v = _mm512_maskz_loadu_ps(lanes, values + i);
    if (kAbsolute) {
      v = _mm512_abs_ps(v);
      _mm512_mask_storeu_ps(absolute + i, lanes, v);
    }
    nan |= _mm512_mask_cmp_ps_mask(lanes, v, v, _CMP_UNORD_Q);
    least = _mm512_mask_min_ps(least, lanes, least, v);
    greatest = _mm512_mask_max_ps(greatest, lanes, greatest, v);
  }
  if (nan) return std::nullopt;
  const float* const source = kAbsolute ? absolute : values;
  const int64_t k = (n - 1) / 2;
  const float lower = Select(source, n, k, first, second);
  RowSummary summary{Reduce<true>(least), Reduce<false>(greatest), lower};
  if (n % 2 == 1) return summary;
  // The upper middle value: the lower one again if it repeats past rank k, else the least
  // value above it.
  const __m512 lower_bound = _mm512_set1_ps(lower);
  __m512 above = _mm512_set1_ps(inf);
  int64_t at_most = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = LanesLeft(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, source + i);
    const __mmask16 not_above = _mm512_mask_cmp_ps_mask(lanes, v, lower_bound, _CMP_LE_OQ);
    at_most += Count(not_above);
    above = _mm512_mask_min_ps(above, lanes & static_cast<__mmask16>(~not_above), above, v);
  }
  const float upper = at_most >= k + 2 ? lower : Reduce<true>(above);
  summary.median = 0.5 * (summary.median + static_cast<double>(upper));
  return summary;
}

}  // namespace

bool Avx512SelectionAvailable() {
  static const bool available = __builtin_cpu_supports("avx512f") != 0;
  return available;
}

std::optional<RowSummary> Avx512SummarizeRow(const float* values, int64_t n, bool absolute,
                                             std::vector<float>& scratch) {
  return absolute ? Summarize<true>(values, n, scratch) : Summarize<false>(values, n, scratch);
}

#else  // not x86-64: the radix way only

bool Avx512SelectionAvailable() { return false; }

std::optional<RowSummary> Avx512SummarizeRow(const float*, int64_t, bool, std::vector<float>&) {
  return std::nullopt;
}

#endif

}  // namespace anisoscope::analysis
