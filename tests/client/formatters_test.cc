#include "client/formatters.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "client/job_formatters.h"

namespace anisoscope::client {
namespace {

void AddPoint(v1::QuerySeriesResponse* response, int64_t step, int layer, int head, double value) {
  v1::SeriesPoint* point = response->add_points();
  point->set_step(step);
  point->set_layer(layer);
  point->set_head(head);
  point->set_value(value);
}

v1::QuerySeriesResponse HeadSeries() {
  v1::QuerySeriesResponse response;
  response.set_probe_id("p1");
  response.set_metric("qk_mean_cosine");
  AddPoint(&response, 0, 0, 0, 0.1);
  AddPoint(&response, 100, 0, 0, 0.25);
  AddPoint(&response, 0, 0, 1, -1.0 / 3);
  AddPoint(&response, 100, 0, 1, 12345.678);
  return response;
}

v1::QuerySeriesResponse HiddenSeries() {
  v1::QuerySeriesResponse response;
  response.set_probe_id("p1");
  response.set_metric("hidden_anisotropy");
  AddPoint(&response, 0, 0, -1, 0.5);
  AddPoint(&response, 0, 1, -1, 0.75);
  return response;
}

TEST(FormattersTest, SeriesCsvHasHeaderAndFullPrecision) {
  EXPECT_EQ(SeriesCsv(HeadSeries()),
            "step,layer,head,value\n"
            "0,0,0,0.10000000000000001\n"
            "100,0,0,0.25\n"
            "0,0,1,-0.33333333333333331\n"
            "100,0,1,12345.678\n");
}

TEST(FormattersTest, SeriesCsvLeavesHeadEmptyForHiddenStates) {
  EXPECT_EQ(SeriesCsv(HiddenSeries()), "step,layer,head,value\n0,0,,0.5\n0,1,,0.75\n");
  EXPECT_EQ(SeriesCsv(v1::QuerySeriesResponse()), "step,layer,head,value\n");
}

TEST(FormattersTest, SeriesJsonIsAListOfObjects) {
  EXPECT_EQ(SeriesJson(HiddenSeries()),
            "[\n"
            "  {\"step\":0,\"layer\":0,\"head\":null,\"value\":0.5},\n"
            "  {\"step\":0,\"layer\":1,\"head\":null,\"value\":0.75}\n"
            "]\n");
}

TEST(FormattersTest, JsonWritesNonFiniteValuesAsTheHttpApiDoes) {
  v1::QuerySeriesResponse series;
  AddPoint(&series, 7, 2, 3, std::numeric_limits<double>::quiet_NaN());
  AddPoint(&series, 8, 2, 3, std::numeric_limits<double>::infinity());
  AddPoint(&series, 9, 2, 3, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(SeriesJson(series),
            "[\n"
            "  {\"step\":7,\"layer\":2,\"head\":3,\"value\":\"NaN\"},\n"
            "  {\"step\":8,\"layer\":2,\"head\":3,\"value\":\"Infinity\"},\n"
            "  {\"step\":9,\"layer\":2,\"head\":3,\"value\":\"-Infinity\"}\n"
            "]\n");
  v1::QueryVectorsResponse vectors;
  v1::VectorPoint* point = vectors.add_points();
  point->set_step(1);
  point->add_values(std::numeric_limits<double>::quiet_NaN());
  point->add_values(0.25);
  EXPECT_EQ(VectorsJson(vectors), "[\n  {\"step\":1,\"values\":[\"NaN\",0.25]}\n]\n");
  v1::QueryTrajectoryResponse trajectory;
  v1::TrajectoryPoint* at = trajectory.add_points();
  at->set_step(2);
  at->set_q_x(std::numeric_limits<double>::infinity());
  EXPECT_EQ(TrajectoryJson(trajectory),
            "[\n  {\"step\":2,\"q_x\":\"Infinity\",\"q_y\":0.0,\"k_x\":0.0,\"k_y\":0.0}\n]\n");

  EXPECT_EQ(SeriesJson(v1::QuerySeriesResponse()), "[]\n");
}

TEST(FormattersTest, SeriesTableHasOneRowPerStepAndOneColumnPerHead) {
  EXPECT_EQ(SeriesTable("r", HeadSeries()),
            "run r  probe p1  metric qk_mean_cosine\n"
            "STEP  L0H0       L0H1\n"
            "   0   0.1    -0.3333\n"
            " 100  0.25  1.235e+04\n");
}

TEST(FormattersTest, SeriesTableNamesHiddenStateColumnsByLayer) {
  EXPECT_EQ(SeriesTable("r", HiddenSeries()),
            "run r  probe p1  metric hidden_anisotropy\n"
            "STEP   L0    L1\n"
            "   0  0.5  0.75\n");
}

TEST(FormattersTest, SeriesTableMarksMissingCellsAndEmptyResults) {
  v1::QuerySeriesResponse response = HiddenSeries();
  AddPoint(&response, 10, 1, -1, 1);
  EXPECT_EQ(SeriesTable("r", response),
            "run r  probe p1  metric hidden_anisotropy\n"
            "STEP   L0    L1\n"
            "   0  0.5  0.75\n"
            "  10    -     1\n");
  v1::QuerySeriesResponse empty;
  empty.set_probe_id("p1");
  empty.set_metric("attn_entropy");
  EXPECT_EQ(SeriesTable("r", empty), "run r  probe p1  metric attn_entropy\n(no points)\n");
}

TEST(FormattersTest, SeriesTableWrapsColumnsThatDoNotFit) {
  v1::QuerySeriesResponse response;
  for (int head = 0; head < 4; ++head) AddPoint(&response, 5, 0, head, head);
  // STEP (4) + 2 + 4 + 2 + 4 = 16 columns of text fit in 17, the third head does not.
  EXPECT_EQ(SeriesTable("r", response, 17),
            "run r  probe   metric \n"
            "STEP  L0H0  L0H1\n"
            "   5     0     1\n"
            "\n"
            "STEP  L0H2  L0H3\n"
            "   5     2     3\n");
}

TEST(FormattersTest, VectorsJsonAndCsv) {
  v1::QueryVectorsResponse response;
  v1::VectorPoint* a = response.add_points();
  a->set_step(0);
  a->add_values(0.5);
  a->add_values(-2);
  v1::VectorPoint* b = response.add_points();
  b->set_step(10);
  b->add_values(0.1);
  b->add_values(3);
  EXPECT_EQ(VectorsJson(response),
            "[\n"
            "  {\"step\":0,\"values\":[0.5,-2.0]},\n"
            "  {\"step\":10,\"values\":[0.1,3.0]}\n"
            "]\n");
  EXPECT_EQ(VectorsCsv(response), "step,v0,v1\n0,0.5,-2\n10,0.10000000000000001,3\n");
  EXPECT_EQ(VectorsJson(v1::QueryVectorsResponse()), "[]\n");
  EXPECT_EQ(VectorsCsv(v1::QueryVectorsResponse()), "step\n");
}

TEST(FormattersTest, Numbers) {
  EXPECT_EQ(FullPrecision(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FullPrecision(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(ShortNumber(3.14159265), "3.142");
  EXPECT_EQ(ShortNumber(0.000123456), "0.0001235");
}

TEST(FormattersTest, RenderTablePadsAndAligns) {
  EXPECT_EQ(RenderTable({"A", "NUM"}, {{"xyz", "1"}, {"q", "100"}}, {false, true}),
            "A    NUM\n"
            "xyz    1\n"
            "q    100\n");
}

TEST(JobFormattersTest, JobsTableListsOneRowPerJob) {
  v1::Job job;
  job.set_id(7);
  job.set_run("multiberts-seed0");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_steps_finished(3);
  job.set_steps_total(12);
  job.set_created_at("2024-05-01T10:00:00Z");
  EXPECT_EQ(JobsTable({job}),
            "ID  RUN               STATE    FINISHED  CREATED\n"
            " 7  multiberts-seed0  running      3/12  2024-05-01T10:00:00Z\n");
}

TEST(JobFormattersTest, JobDetailsShowEachCheckpoint) {
  v1::Job job;
  job.set_id(3);
  job.set_run("r");
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_steps_total(2);
  job.set_steps_finished(2);
  job.mutable_probe()->set_source(v1::PROBE_SOURCE_TEXT);
  job.mutable_probe()->set_path("/data/wiki.txt");
  job.mutable_probe()->set_mode(v1::PROBE_MODE_LINES);
  job.mutable_probe()->set_samples(64);
  job.set_created_at("c");
  job.set_updated_at("u");
  v1::CheckpointStatus* done = job.add_checkpoints();
  done->set_step(0);
  done->set_state(v1::STEP_STATE_DONE);
  done->set_seconds(4.06);
  done->set_attempt(2);
  done->set_worker("node7-gpu0");
  v1::CheckpointStatus* failed = job.add_checkpoints();
  failed->set_step(2000);
  failed->set_state(v1::STEP_STATE_FAILED);
  failed->set_error("truncated file");
  failed->set_attempt(1);
  failed->set_worker("embedded-1");
  EXPECT_EQ(JobDetails(job),
            "job 3\n"
            "  run:      r\n"
            "  state:    failed (2/2 checkpoints finished)\n"
            "  probe:    text /data/wiki.txt (lines, 64 samples, seq-len model max)\n"
            "  created:  c\n"
            "  updated:  u\n"
            "\n"
            "STEP  STATE   SECONDS  ATTEMPT  WORKER      ERROR\n"
            "   0  done        4.1        2  node7-gpu0\n"
            "2000  failed      0.0        1  embedded-1  truncated file\n");
}

TEST(JobFormattersTest, RunsTableShowsShapeProbesStepRangeAndDuplicates) {
  v1::Run run;
  run.set_name("pythia-70m");
  run.set_model_family("gpt_neox");
  run.set_num_layers(6);
  run.set_num_heads(8);
  v1::Probe* labelled = run.add_probes();
  labelled->set_id("p1");
  labelled->set_description("probe.jsonl · 128 x 512");
  run.add_probes()->set_id("p2");  // stored without a label
  for (int64_t step : {1000, 0, 143000}) run.add_steps(step);
  v1::StepDuplicate* duplicate = run.add_duplicates();
  duplicate->set_step(143000);
  duplicate->set_duplicate_of(1000);
  v1::Run empty;
  empty.set_name("new");
  EXPECT_EQ(
      RunsTable({run, empty}),
      "NAME        FAMILY    LAYERSxHEADS  PROBES                            STEPS  RANGE      "
      "SAME WEIGHTS\n"
      "pythia-70m  gpt_neox           6x8  probe.jsonl · 128 x 512 (p1); p2      3  0..143000  "
      "143000=1000\n"
      "new                            0x0  -                                     0  -          "
      "-\n");
}

}  // namespace
}  // namespace anisoscope::client
