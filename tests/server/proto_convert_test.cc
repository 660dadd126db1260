#include "server/proto_convert.h"

#include <gtest/gtest.h>

#include "tests/server/fake_extractor.h"

namespace anisoscope::server {
namespace {

TEST(ProtoConvertTest, StepResultHasEveryScalarAndBothVectorsPerHead) {
  const analysis::CheckpointMetrics metrics = testing::FakeMetricsFor("/x/step_5");
  analysis::Probe probe;
  probe.id = "p0123456789abcdef";
  probe.description = "tokens probe.jsonl";
  storage::StepResult result = ToStepResult("run", 5, "/x/step_5", 1234, probe, metrics);
  EXPECT_EQ(result.run, "run");
  EXPECT_EQ(result.step, 5);
  EXPECT_EQ(result.checkpoint_bytes, 1234);
  EXPECT_EQ(result.probe.id, "p0123456789abcdef");
  EXPECT_EQ(result.probe.num_samples, metrics.num_samples);
  EXPECT_EQ(result.probe.num_tokens, metrics.num_tokens);
  EXPECT_EQ(result.model_family, "bert");
  EXPECT_EQ(result.num_layers, 2);
  EXPECT_EQ(result.num_heads, 2);
  EXPECT_EQ(result.head_dim, 4);
  // 4 heads x 7 per-head metrics + 3 hidden states x 2.
  EXPECT_EQ(result.scalars.size(), 4u * 7 + 3 * 2);
  ASSERT_EQ(result.vectors.size(), 8u);
  EXPECT_EQ(result.vectors[0].kind, "q_mean");
  EXPECT_EQ(result.vectors[1].kind, "k_mean");
  EXPECT_EQ(result.vectors[7].layer, 1);
  EXPECT_EQ(result.vectors[7].head, 1);
  EXPECT_EQ(result.vectors[7].values, metrics.heads[3].k_mean);
  bool found_hidden = false;
  for (const storage::ScalarValue& s : result.scalars) {
    if (s.metric == "hidden_mean_norm" && s.layer == 2) {
      found_hidden = true;
      EXPECT_EQ(s.head, -1);
      EXPECT_DOUBLE_EQ(s.value, metrics.hidden_states[2].mean_norm);
    }
  }
  EXPECT_TRUE(found_hidden);
}

TEST(ProtoConvertTest, JobCountsFinishedSteps) {
  storage::JobRecord job;
  job.id = 7;
  job.spec.run = "r";
  job.spec.probe_source = "text";
  job.spec.probe_mode = "lines";
  job.spec.probe_path = "/p.txt";
  job.spec.samples = 64;
  job.state = storage::JobState::kRunning;
  for (auto state :
       {storage::StepState::kDone, storage::StepState::kSkipped, storage::StepState::kRunning,
        storage::StepState::kPending, storage::StepState::kFailed}) {
    storage::JobCheckpoint c;
    c.state = state;
    job.checkpoints.push_back(c);
  }
  pb::Job proto;
  ToProto(job, &proto);
  EXPECT_EQ(proto.id(), 7);
  EXPECT_EQ(proto.state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(proto.steps_total(), 5);
  EXPECT_EQ(proto.steps_finished(), 3);
  EXPECT_EQ(proto.probe().source(), pb::PROBE_SOURCE_TEXT);
  EXPECT_EQ(proto.probe().mode(), pb::PROBE_MODE_LINES);
  EXPECT_EQ(proto.probe().samples(), 64);
  EXPECT_EQ(proto.checkpoints(4).state(), pb::STEP_STATE_FAILED);
}

TEST(ProtoConvertTest, ProbeSpecRoundTripsAndDefaults) {
  pb::ProbeSpec probe;
  probe.set_source(pb::PROBE_SOURCE_TEXT);
  storage::JobSpec spec;
  ASSERT_TRUE(ProbeSpecFromProto(probe, &spec).ok());
  EXPECT_EQ(spec.probe_source, "text");
  EXPECT_EQ(spec.probe_mode, "windows");
  EXPECT_EQ(spec.samples, 128);
  EXPECT_EQ(spec.seq_len, 0);
  spec.probe_path = "/p.txt";
  auto analysis_spec = ToAnalysisProbeSpec(spec);
  ASSERT_TRUE(analysis_spec.ok());
  EXPECT_EQ(analysis_spec->source, analysis::ProbeSource::kText);
  EXPECT_EQ(analysis_spec->mode, analysis::TextMode::kWindows);
  EXPECT_EQ(analysis_spec->samples, 128);
  EXPECT_EQ(analysis_spec->file, "/p.txt");
}

}  // namespace
}  // namespace anisoscope::server
