#include "server/monitoring/service_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace anisoscope::server {
namespace {

using ::testing::HasSubstr;

TEST(HistogramTest, BucketsAreCumulativeWithInfSumAndCount) {
  Histogram histogram({1, 10});
  for (const double value : {0.5, 1.0, 5.0, 50.0}) histogram.Observe({{"kind", "a"}}, value);
  std::string text;
  histogram.AppendExposition("x_seconds", "Help.", &text);
  EXPECT_EQ(text,
            "# HELP x_seconds Help.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{kind=\"a\",le=\"1\"} 2\n"
            "x_seconds_bucket{kind=\"a\",le=\"10\"} 3\n"
            "x_seconds_bucket{kind=\"a\",le=\"+Inf\"} 4\n"
            "x_seconds_sum{kind=\"a\"} 56.5\n"
            "x_seconds_count{kind=\"a\"} 4\n");
}

TEST(ServiceMetricsTest, ExpositionHasGaugesCountersAndDeviceKinds) {
  ServiceMetrics metrics;
  metrics.RecordCheckpoint("gpt_neox", "cuda:0 (NVIDIA H100)", 0.2);
  metrics.RecordCheckpoint("gpt_neox", "cuda:1 (NVIDIA H100)", 0.3);
  metrics.RecordQuery("http", "/api/v1/series", 0.004);
  ServiceMetrics::Gauges gauges;
  gauges.jobs_by_state = {{"queued", 2}, {"running", 1}};
  gauges.queued_steps = 7;
  gauges.database_bytes = 8192;
  const std::string text = metrics.Exposition(gauges);
  EXPECT_THAT(text, HasSubstr("anisoscope_jobs{state=\"queued\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE anisoscope_queued_steps gauge\nanisoscope_queued_steps 7\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_database_bytes 8192\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_checkpoints_analysed_total{family=\"gpt_neox\","
                              "device=\"cuda\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_query_seconds_bucket{api=\"http\",method=\"/api/v1/"
                              "series\",le=\"0.005\"} 1\n"));
}

TEST(ServiceMetricsTest, RemoteFetchesAddUpAndWorkerNumbersCannotMakeThemShrink) {
  ServiceMetrics metrics;
  const std::string before = metrics.Exposition({});
  EXPECT_THAT(before, HasSubstr("anisoscope_source_bytes_fetched_total 0\n"));
  EXPECT_THAT(before, HasSubstr("anisoscope_source_cache_hits_total 0\n"));
  metrics.RecordFetch({false, 3000, 2, 1.5});
  metrics.RecordFetch({true, 0, 0, 0.01});
  metrics.RecordFetch({false, -5, -1, std::nan("")});  // a worker's nonsense counts as 0
  const std::string text = metrics.Exposition({});
  EXPECT_THAT(text, HasSubstr("# TYPE anisoscope_source_steps_fetched_total counter\n"
                              "anisoscope_source_steps_fetched_total 3\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_source_cache_hits_total 1\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_source_bytes_fetched_total 3000\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_source_fetch_retries_total 2\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_source_fetch_seconds_total 1.51\n"));
}

// Family and device come from workers: whatever they send, the label values stay a fixed set.
TEST(ServiceMetricsTest, WorkerSuppliedLabelsAreABoundedSet) {
  ServiceMetrics metrics;
  for (int i = 0; i < 100; ++i) {
    metrics.RecordCheckpoint("family-" + std::to_string(i), "tpu" + std::to_string(i) + ":0", 1);
  }
  metrics.RecordCheckpoint("bert", "cpu", 1);
  metrics.RecordCheckpoint("llama", "", 1);
  const std::string text = metrics.Exposition({});
  EXPECT_THAT(text, HasSubstr("anisoscope_checkpoints_analysed_total{family=\"other\","
                              "device=\"other\"} 100\n"));
  EXPECT_THAT(text, HasSubstr("{family=\"bert\",device=\"cpu\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("{family=\"llama\",device=\"unknown\"} 1\n"));
  EXPECT_EQ(text.find("family-"), std::string::npos);
  EXPECT_EQ(text.find("tpu"), std::string::npos);
}

TEST(ServiceMetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace anisoscope::server
