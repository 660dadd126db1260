#include "server/proto_convert.h"

#include <gtest/gtest.h>


namespace anisoscope::server {
namespace {

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
}

}  // namespace
}  // namespace anisoscope::server
