// ProjectOnTopTwo against cases whose SVD is known by hand.
#include "server/queries/trajectory_projection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace anisoscope::server {
namespace {

constexpr double kTol = 1e-10;

TEST(TrajectoryProjectionTest, DiagonalMatrixGivesAxesAndSingularValues) {
  // M = diag(3, 2, 1) padded: the right singular vectors are e0, e1, e2.
  const std::vector<std::vector<double>> rows = {{3, 0, 0}, {0, 2, 0}, {0, 0, 1}, {0, 0, 0}};
  auto projection = ProjectOnTopTwo(rows);
  ASSERT_TRUE(projection.ok()) << projection.status();
  ASSERT_EQ(projection->singular_values.size(), 3u);
  EXPECT_NEAR(projection->singular_values[0], 3, kTol);
  EXPECT_NEAR(projection->singular_values[1], 2, kTol);
  EXPECT_NEAR(projection->singular_values[2], 1, kTol);
  EXPECT_NEAR(projection->explained_variance, 13.0 / 14.0, kTol);
  EXPECT_NEAR(projection->coordinates[0][0], 3, kTol);
  EXPECT_NEAR(projection->coordinates[1][1], 2, kTol);
  EXPECT_NEAR(projection->coordinates[2][0], 0, kTol);
}

TEST(TrajectoryProjectionTest, VectorsInAPlaneAreReproducedWithSignConvention) {
  // Rows in the plane spanned by a = (1,1,0,0)/sqrt2 and b = (0,0,1,-1)/sqrt2 (d = 8, fewer
  // rows than columns, so the M M^T path runs). Coordinates along a sum to -(...) < 0 as
  // built, so v1 must come out as -a direction-wise: the sum of coordinates on v1 is >= 0.
  const double r = 1 / std::sqrt(2.0);
  const std::vector<double> a = {r, r, 0, 0, 0, 0, 0, 0};
  const std::vector<double> b = {0, 0, r, -r, 0, 0, 0, 0};
  // sum x*y = 0, so a and b are exactly the singular directions (sum x^2 = 50 > sum y^2).
  const std::vector<std::pair<double, double>> coords = {{-3, 2}, {-5, -1}, {-4, -0.25}};
  std::vector<std::vector<double>> rows;
  for (const auto& [x, y] : coords) {
    std::vector<double> row(8);
    for (int i = 0; i < 8; ++i) row[i] = x * a[i] + y * b[i];
    rows.push_back(row);
  }
  auto projection = ProjectOnTopTwo(rows);
  ASSERT_TRUE(projection.ok()) << projection.status();
  EXPECT_NEAR(projection->explained_variance, 1.0, kTol);
  EXPECT_NEAR(projection->singular_values[2], 0, 1e-6);
  double sum_x = 0;
  double sum_y = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    // v1 = -a (the dominant direction, flipped), so x = -coords.x; |y| = |coords.y|.
    EXPECT_NEAR(projection->coordinates[i][0], -coords[i].first, 1e-9);
    EXPECT_NEAR(std::fabs(projection->coordinates[i][1]), std::fabs(coords[i].second), 1e-9);
    sum_x += projection->coordinates[i][0];
    sum_y += projection->coordinates[i][1];
  }
  EXPECT_GE(sum_x, 0);
  EXPECT_GE(sum_y, 0);
  // Sum of y as built is 0.75 > 0, so v2 = +b.
  EXPECT_NEAR(projection->coordinates[0][1], 2, 1e-9);
  EXPECT_NEAR(projection->singular_values[0], std::sqrt(50.0), 1e-9);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(projection->basis[0][i], -a[i], 1e-9);
}

TEST(TrajectoryProjectionTest, SingleVectorHasRankOneAndAnOrthogonalSecondAxis) {
  auto projection = ProjectOnTopTwo({{0, 3, 4}});
  ASSERT_TRUE(projection.ok()) << projection.status();
  EXPECT_NEAR(projection->singular_values[0], 5, kTol);
  EXPECT_NEAR(projection->explained_variance, 1, kTol);
  EXPECT_NEAR(projection->coordinates[0][0], 5, kTol);
  EXPECT_NEAR(projection->coordinates[0][1], 0, kTol);
  double dot = 0;
  double norm = 0;
  for (int i = 0; i < 3; ++i) {
    dot += projection->basis[0][i] * projection->basis[1][i];
    norm += projection->basis[1][i] * projection->basis[1][i];
  }
  EXPECT_NEAR(dot, 0, kTol);
  EXPECT_NEAR(norm, 1, kTol);
}

TEST(TrajectoryProjectionTest, TallMatrixUsesGramOfColumns) {
  // 6 rows x 2 columns: rows (t, 2t); v1 = (1,2)/sqrt5, s1 = sqrt(5 * sum t^2).
  std::vector<std::vector<double>> rows;
  double sum = 0;
  for (int t = 1; t <= 6; ++t) {
    rows.push_back({static_cast<double>(t), 2.0 * t});
    sum += t * t;
  }
  auto projection = ProjectOnTopTwo(rows);
  ASSERT_TRUE(projection.ok()) << projection.status();
  EXPECT_NEAR(projection->singular_values[0], std::sqrt(5 * sum), 1e-9);
  EXPECT_NEAR(projection->singular_values[1], 0, 1e-6);
  EXPECT_NEAR(projection->basis[0][0], 1 / std::sqrt(5.0), kTol);
  EXPECT_NEAR(projection->basis[0][1], 2 / std::sqrt(5.0), kTol);
  EXPECT_NEAR(projection->coordinates[2][0], 3 * std::sqrt(5.0), 1e-9);
}

TEST(TrajectoryProjectionTest, RaggedOrEmptyInputIsRefused) {
  EXPECT_EQ(ProjectOnTopTwo({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProjectOnTopTwo({{1, 2}, {3}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProjectOnTopTwo({{1, NAN}}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope::server
