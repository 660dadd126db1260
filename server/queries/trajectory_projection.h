// The 2-D projection behind QueryTrajectory (Godey et al., Figure 12): the top two right
// singular vectors of an uncentered stack of vectors, in float64, by Eigen's SVD. Pure;
// thread-safe.
#pragma once

#include <array>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::server {

struct TopTwoProjection {
  // Singular values of M, descending; min(rows, cols) of them.
  std::vector<double> singular_values;
  // v1, v2: unit right singular vectors (cols entries each), each oriented so that the
  // coordinates of all rows on it sum to >= 0. When M has rank < 2 the missing directions
  // are completed to an orthonormal pair; when cols == 1, v2 is all zeros.
  std::array<std::vector<double>, 2> basis;
  // <row, v1>, <row, v2> for every row of M, in row order.
  std::vector<std::array<double, 2>> coordinates;
  // (s1^2 + s2^2) / sum of s_i^2; 0 when M is all zeros.
  double explained_variance = 0;
};

// `rows` is M (rows x cols), uncentered. INVALID_ARGUMENT when it is empty, a row is empty,
// the rows differ in length or a value is not finite.
absl::StatusOr<TopTwoProjection> ProjectOnTopTwo(const std::vector<std::vector<double>>& rows);

}  // namespace anisoscope::server
