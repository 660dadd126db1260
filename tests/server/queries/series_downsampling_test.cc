// DownsampleSeries against the rule written in the contract, checked point by point.
#include "server/queries/series_downsampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace anisoscope::server {
namespace {

using storage::SeriesPoint;

std::vector<SeriesPoint> Series(int layer, int head, const std::vector<double>& values) {
  std::vector<SeriesPoint> points;
  for (size_t i = 0; i < values.size(); ++i) {
    points.push_back({static_cast<int64_t>(i) * 10, layer, head, values[i]});
  }
  return points;
}

std::vector<int64_t> Steps(const std::vector<SeriesPoint>& points) {
  std::vector<int64_t> steps;
  for (const SeriesPoint& point : points) steps.push_back(point.step);
  return steps;
}

TEST(SeriesDownsamplingTest, SeriesAtOrUnderTheLimitIsUntouched) {
  std::vector<SeriesPoint> points = Series(0, 1, {3, 1, 2, 5});
  EXPECT_FALSE(DownsampleSeries(4, &points));
  EXPECT_EQ(points.size(), 4u);
  EXPECT_FALSE(DownsampleSeries(0, &points));
  EXPECT_EQ(points.size(), 4u);
}

TEST(SeriesDownsamplingTest, KeepsEachBucketsMinAndMaxAndTheEnds) {
  // 12 points, max_points 6: 3 buckets of 4 points.
  //   bucket 0: steps 0..30    values 5 9 1 4  -> min step 20, max step 10
  //   bucket 1: steps 40..70   values 6 6 6 6  -> one point (step 40)
  //   bucket 2: steps 80..110  values 2 8 0 3  -> max step 90, min step 100
  std::vector<SeriesPoint> points = Series(2, 3, {5, 9, 1, 4, 6, 6, 6, 6, 2, 8, 0, 3});
  EXPECT_TRUE(DownsampleSeries(6, &points));
  EXPECT_EQ(Steps(points), (std::vector<int64_t>{0, 10, 20, 40, 90, 100, 110}));
  for (const SeriesPoint& point : points) {
    EXPECT_EQ(point.layer, 2);
    EXPECT_EQ(point.head, 3);
    EXPECT_EQ(point.value,
              std::vector<double>({5, 9, 1, 4, 6, 6, 6, 6, 2, 8, 0, 3})[point.step / 10]);
  }
}

TEST(SeriesDownsamplingTest, BucketCountIsHalfTheLimitAndExtremesSurvive) {
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(std::sin(i * 0.05) + (i == 537 ? 10 : 0));
  std::vector<SeriesPoint> points = Series(0, 0, values);
  ASSERT_TRUE(DownsampleSeries(100, &points));
  EXPECT_LE(points.size(), 102u);  // 50 buckets x 2 + first + last
  EXPECT_GE(points.size(), 50u);
  EXPECT_EQ(points.front().step, 0);
  EXPECT_EQ(points.back().step, 9990);
  bool spike = false;
  for (size_t i = 1; i < points.size(); ++i) EXPECT_LT(points[i - 1].step, points[i].step);
  for (const SeriesPoint& point : points) spike = spike || point.step == 5370;
  EXPECT_TRUE(spike) << "the global maximum was dropped";
}

TEST(SeriesDownsamplingTest, EachLayerHeadSeriesIsReducedOnItsOwn) {
  std::vector<SeriesPoint> points = Series(0, 0, {1, 2, 3, 4, 5, 6, 7, 8});
  for (const SeriesPoint& p : Series(0, 1, {1, 2})) points.push_back(p);
  for (const SeriesPoint& p : Series(1, -1, {8, 7, 6, 5, 4, 3, 2, 1})) points.push_back(p);
  ASSERT_TRUE(DownsampleSeries(2, &points));  // one bucket: min, max (= the ends)
  std::vector<std::vector<int>> keys;
  for (const SeriesPoint& p : points) keys.push_back({p.layer, p.head, static_cast<int>(p.step)});
  EXPECT_EQ(keys, (std::vector<std::vector<int>>{
                      {0, 0, 0}, {0, 0, 70}, {0, 1, 0}, {0, 1, 10}, {1, -1, 0}, {1, -1, 70}}));
}

TEST(SeriesDownsamplingTest, NanIsNeverChosenAsAnExtreme) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<SeriesPoint> points = Series(0, 0, {1, nan, 7, nan, 0, 2});
  ASSERT_TRUE(DownsampleSeries(2, &points));
  EXPECT_EQ(Steps(points), (std::vector<int64_t>{0, 20, 40, 50}));
}

}  // namespace
}  // namespace anisoscope::server
