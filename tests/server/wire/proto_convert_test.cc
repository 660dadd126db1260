#include "server/wire/proto_convert.h"

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "proto/final_states.h"

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

TEST(ProtoConvertTest, LinesModeAppliesOnlyToATextProbe) {
  pb::ProbeSpec probe;
  probe.set_source(pb::PROBE_SOURCE_TOKENS);
  probe.set_mode(pb::PROBE_MODE_LINES);
  storage::JobSpec spec;
  const absl::Status status = ProbeSpecFromProto(probe, &spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "probe.mode LINES applies only to a TEXT probe");
  probe.set_mode(pb::PROBE_MODE_WINDOWS);  // what a tokens job's stored probe reads back as
  EXPECT_TRUE(ProbeSpecFromProto(probe, &spec).ok());
}

TEST(ProtoConvertTest, EveryStorageStateHasTheWireValueOfItsName) {
  for (const storage::JobState state : storage::kJobStates) {
    const pb::JobState wire = ToProto(state);
    ASSERT_NE(wire, pb::JOB_STATE_UNSPECIFIED) << storage::JobStateName(state);
    EXPECT_EQ(absl::AsciiStrToLower(pb::JobState_Name(wire)),
              std::string("job_state_") + storage::JobStateName(state));
  }
  for (const storage::StepState state : storage::kStepStates) {
    const pb::StepState wire = ToProto(state);
    ASSERT_NE(wire, pb::STEP_STATE_UNSPECIFIED) << storage::StepStateName(state);
    EXPECT_EQ(absl::AsciiStrToLower(pb::StepState_Name(wire)),
              std::string("step_state_") + storage::StepStateName(state));
  }
}

TEST(ProtoConvertTest, FinalStatesComeFromTheProto) {
  EXPECT_FALSE(pb::IsFinal(ToProto(storage::JobState::kQueued)));
  EXPECT_FALSE(pb::IsFinal(ToProto(storage::JobState::kRunning)));
  EXPECT_TRUE(pb::IsFinal(ToProto(storage::JobState::kSucceeded)));
  EXPECT_TRUE(pb::IsFinal(ToProto(storage::JobState::kFailed)));
  EXPECT_TRUE(pb::IsFinal(ToProto(storage::JobState::kCancelled)));
  EXPECT_FALSE(pb::IsFinal(pb::JOB_STATE_UNSPECIFIED));
  EXPECT_FALSE(pb::IsFinal(static_cast<pb::JobState>(99)));
  EXPECT_FALSE(pb::IsFinal(ToProto(storage::StepState::kPending)));
  EXPECT_FALSE(pb::IsFinal(ToProto(storage::StepState::kRunning)));
  for (const storage::StepState state :
       {storage::StepState::kDone, storage::StepState::kSkipped, storage::StepState::kFailed,
        storage::StepState::kCancelled}) {
    EXPECT_TRUE(pb::IsFinal(ToProto(state))) << storage::StepStateName(state);
  }
}

}  // namespace
}  // namespace anisoscope::server
