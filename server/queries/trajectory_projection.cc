#include "server/queries/trajectory_projection.h"

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace anisoscope::server {

absl::StatusOr<TopTwoProjection> ProjectOnTopTwo(const std::vector<std::vector<double>>& rows) {
  if (rows.empty()) return absl::InvalidArgumentError("no vectors to project");
  const size_t cols = rows[0].size();
  if (cols == 0) return absl::InvalidArgumentError("vectors are empty");
  Eigen::MatrixXd m(rows.size(), cols);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != cols) {
      return absl::InvalidArgumentError(
          absl::StrCat("vector ", r, " has ", rows[r].size(), " values, want ", cols));
    }
    for (size_t c = 0; c < cols; ++c) {
      if (!std::isfinite(rows[r][c])) {
        return absl::InvalidArgumentError(absl::StrCat("vector ", r, " has a non-finite value"));
      }
      m(r, c) = rows[r][c];
    }
  }
  // The full V: its columns are orthonormal even past M's rank, which completes the pair
  // for a single vector or a rank-one stack.
  const Eigen::BDCSVD<Eigen::MatrixXd> svd(m, Eigen::ComputeFullV);
  const Eigen::VectorXd& singular = svd.singularValues();  // min(rows, cols), descending

  TopTwoProjection out;
  out.singular_values.assign(singular.data(), singular.data() + singular.size());
  Eigen::MatrixXd basis = Eigen::MatrixXd::Zero(cols, 2);  // v2 stays zero when cols == 1
  basis.leftCols(std::min<Eigen::Index>(2, cols)) =
      svd.matrixV().leftCols(std::min<Eigen::Index>(2, cols));
  Eigen::MatrixXd coordinates = m * basis;
  for (int i = 0; i < 2; ++i) {
    if (coordinates.col(i).sum() < 0) {
      basis.col(i) *= -1;
      coordinates.col(i) *= -1;
    }
    out.basis[i].assign(basis.col(i).data(), basis.col(i).data() + cols);
  }
  for (Eigen::Index r = 0; r < coordinates.rows(); ++r) {
    out.coordinates.push_back({coordinates(r, 0), coordinates(r, 1)});
  }
  const double total = m.squaredNorm();  // the sum of s_i^2
  if (total > 0) {
    const double top_two = singular.head(std::min<Eigen::Index>(2, singular.size())).squaredNorm();
    out.explained_variance = std::min(1.0, top_two / total);
  }
  return out;
}

}  // namespace anisoscope::server
