#include "server/trajectory_projection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace anisoscope::server {
namespace {

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Removes from `v` its components along `others` (unit vectors) and normalizes it; false
// when nothing is left.
bool Orthonormalize(const std::vector<std::vector<double>>& others, std::vector<double>* v) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::vector<double>& other : others) {
      const double along = Dot(*v, other);
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] -= along * other[i];
    }
  }
  const double norm = std::sqrt(Dot(*v, *v));
  if (norm < 1e-8) return false;
  for (double& x : *v) x /= norm;
  return true;
}

// A unit vector orthogonal to `others`, from the standard basis.
std::vector<double> CompleteBasis(const std::vector<std::vector<double>>& others, size_t n) {
  for (size_t axis = 0; axis < n; ++axis) {
    std::vector<double> v(n, 0.0);
    v[axis] = 1;
    if (Orthonormalize(others, &v)) return v;
  }
  return std::vector<double>(n, 0.0);
}

}  // namespace

SymmetricEigen JacobiEigen(std::vector<double> a, int n) {
  std::vector<double> v(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) v[i * n + i] = 1;
  auto at = [&](int r, int c) -> double& { return a[static_cast<size_t>(r) * n + c]; };
  double total = 0;
  for (double x : a) total += x * x;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) off += at(p, q) * at(p, q);
    }
    if (off <= 1e-30 * total || off == 0) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        const double apq = at(p, q);
        if (apq == 0) continue;
        // The rotation that zeroes a[p][q] (Golub & Van Loan, Algorithm 8.4.1).
        const double theta = (at(q, q) - at(p, p)) / (2 * apq);
        const double t =
            (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1);
        const double s = t * c;
        for (int k = 0; k < n; ++k) {  // A <- A J (columns p, q)
          const double akp = at(k, p);
          const double akq = at(k, q);
          at(k, p) = c * akp - s * akq;
          at(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // A <- J^T A (rows p, q)
          const double apk = at(p, k);
          const double aqk = at(q, k);
          at(p, k) = c * apk - s * aqk;
          at(q, k) = s * apk + c * aqk;
        }
        for (int k = 0; k < n; ++k) {  // V <- V J
          const double vkp = v[k * n + p];
          const double vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return at(x, x) > at(y, y); });
  SymmetricEigen out;
  for (int i : order) {
    out.eigenvalues.push_back(at(i, i));
    std::vector<double>& vec = out.eigenvectors.emplace_back(n);
    for (int k = 0; k < n; ++k) vec[k] = v[k * n + i];
  }
  return out;
}

absl::StatusOr<TopTwoProjection> ProjectOnTopTwo(const std::vector<std::vector<double>>& rows) {
  if (rows.empty()) return absl::InvalidArgumentError("no vectors to project");
  const size_t cols = rows[0].size();
  if (cols == 0) return absl::InvalidArgumentError("vectors are empty");
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != cols) {
      return absl::InvalidArgumentError(
          absl::StrCat("vector ", r, " has ", rows[r].size(), " values, want ", cols));
    }
    for (double x : rows[r]) {
      if (!std::isfinite(x)) {
        return absl::InvalidArgumentError(absl::StrCat("vector ", r, " has a non-finite value"));
      }
    }
  }
  const size_t m = rows.size();
  TopTwoProjection out;
  std::vector<std::vector<double>> basis;  // the right singular vectors found, descending
  if (m < cols) {
    // Eigen of M M^T (m x m): v_i = M^T u_i / s_i.
    std::vector<double> gram(m * m);
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = i; j < m; ++j) gram[i * m + j] = gram[j * m + i] = Dot(rows[i], rows[j]);
    }
    const SymmetricEigen eigen = JacobiEigen(std::move(gram), static_cast<int>(m));
    for (size_t i = 0; i < m; ++i) {
      out.singular_values.push_back(std::sqrt(std::max(0.0, eigen.eigenvalues[i])));
    }
    for (size_t i = 0; i < 2 && i < m; ++i) {
      std::vector<double> v(cols, 0.0);
      for (size_t r = 0; r < m; ++r) {
        for (size_t c = 0; c < cols; ++c) v[c] += eigen.eigenvectors[i][r] * rows[r][c];
      }
      if (out.singular_values[i] <= 1e-12 * std::max(out.singular_values[0], 1e-300) ||
          !Orthonormalize(basis, &v)) {
        v = CompleteBasis(basis, cols);
      }
      basis.push_back(std::move(v));
    }
  } else {
    // Eigen of M^T M (cols x cols): its eigenvectors are the right singular vectors.
    std::vector<double> gram(cols * cols, 0.0);
    for (const std::vector<double>& row : rows) {
      for (size_t i = 0; i < cols; ++i) {
        for (size_t j = i; j < cols; ++j) gram[i * cols + j] += row[i] * row[j];
      }
    }
    for (size_t i = 0; i < cols; ++i) {
      for (size_t j = 0; j < i; ++j) gram[i * cols + j] = gram[j * cols + i];
    }
    const SymmetricEigen eigen = JacobiEigen(std::move(gram), static_cast<int>(cols));
    for (size_t i = 0; i < cols; ++i) {
      out.singular_values.push_back(std::sqrt(std::max(0.0, eigen.eigenvalues[i])));
    }
    for (size_t i = 0; i < 2 && i < cols; ++i) basis.push_back(eigen.eigenvectors[i]);
  }
  while (basis.size() < 2) {  // one row: complete the pair (zeros when cols == 1)
    basis.push_back(basis.size() < cols ? CompleteBasis(basis, cols)
                                        : std::vector<double>(cols, 0.0));
  }

  for (size_t i = 0; i < 2; ++i) {
    double sum = 0;
    for (const std::vector<double>& row : rows) sum += Dot(row, basis[i]);
    if (sum < 0) {
      for (double& x : basis[i]) x = -x;
    }
    out.basis[i] = basis[i];
  }
  for (const std::vector<double>& row : rows) {
    out.coordinates.push_back({Dot(row, out.basis[0]), Dot(row, out.basis[1])});
  }
  double total = 0;  // sum of s_i^2 = squared Frobenius norm of M
  for (const std::vector<double>& row : rows) total += Dot(row, row);
  if (total > 0) {
    const double s1 = out.singular_values[0];
    const double s2 = out.singular_values.size() > 1 ? out.singular_values[1] : 0.0;
    out.explained_variance = std::min(1.0, (s1 * s1 + s2 * s2) / total);
  }
  return out;
}

}  // namespace anisoscope::server
