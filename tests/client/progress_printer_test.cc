#include "client/progress_printer.h"

#include <gtest/gtest.h>

namespace anisoscope::client {
namespace {

v1::CheckpointStatus Checkpoint(int64_t step, v1::StepState state, double seconds = 0,
                                const std::string& error = "") {
  v1::CheckpointStatus checkpoint;
  checkpoint.set_step(step);
  checkpoint.set_state(state);
  checkpoint.set_seconds(seconds);
  checkpoint.set_error(error);
  return checkpoint;
}

v1::JobEvent Event(v1::JobEvent::Kind kind, const v1::CheckpointStatus& checkpoint,
                   int total = 12) {
  v1::JobEvent event;
  event.set_kind(kind);
  event.mutable_job()->set_id(7);
  event.mutable_job()->set_steps_total(total);
  *event.mutable_checkpoint() = checkpoint;
  return event;
}

TEST(ProgressPrinterTest, RendersOneLinePerFinishedStep) {
  ProgressPrinter printer(/*tty=*/false);
  EXPECT_EQ(printer.Render(Event(v1::JobEvent::KIND_STEP_FINISHED,
                                 Checkpoint(20000, v1::STEP_STATE_DONE, 4.06))),
            "[1/12] step 20000 done 4.1 s\n");
  EXPECT_EQ(printer.Render(
                Event(v1::JobEvent::KIND_STEP_FINISHED, Checkpoint(30000, v1::STEP_STATE_SKIPPED))),
            "[2/12] step 30000 skipped (already stored)\n");
  EXPECT_EQ(printer.Render(Event(v1::JobEvent::KIND_STEP_FINISHED,
                                 Checkpoint(40000, v1::STEP_STATE_FAILED, 0.2, "bad shard"))),
            "[3/12] step 40000 FAILED: bad shard\n");
  EXPECT_EQ(printer.Render(Event(v1::JobEvent::KIND_STEP_FINISHED,
                                 Checkpoint(50000, v1::STEP_STATE_CANCELLED))),
            "[4/12] step 50000 cancelled\n");
}

TEST(ProgressPrinterTest, OffATtyStartAndBatchProgressPrintNothing) {
  ProgressPrinter printer(/*tty=*/false);
  v1::JobEvent progress =
      Event(v1::JobEvent::KIND_STEP_PROGRESS, Checkpoint(5, v1::STEP_STATE_RUNNING));
  progress.set_batches_done(3);
  progress.set_batches_total(8);
  EXPECT_EQ(
      printer.Render(Event(v1::JobEvent::KIND_STEP_STARTED, Checkpoint(5, v1::STEP_STATE_RUNNING))),
      "");
  EXPECT_EQ(printer.Render(progress), "");
  EXPECT_EQ(printer.Clear(), "");
}

TEST(ProgressPrinterTest, OnATtyBatchProgressRewritesOneLine) {
  ProgressPrinter printer(/*tty=*/true);
  EXPECT_EQ(printer.Render(
                Event(v1::JobEvent::KIND_STEP_STARTED, Checkpoint(5, v1::STEP_STATE_RUNNING), 2)),
            "\r\033[K[1/2] step 5 ...");
  v1::JobEvent progress =
      Event(v1::JobEvent::KIND_STEP_PROGRESS, Checkpoint(5, v1::STEP_STATE_RUNNING), 2);
  progress.set_batches_done(3);
  progress.set_batches_total(8);
  EXPECT_EQ(printer.Render(progress), "\r\033[K[1/2] step 5 batch 3/8");
  // The permanent line first erases the transient one.
  EXPECT_EQ(printer.Render(Event(v1::JobEvent::KIND_STEP_FINISHED,
                                 Checkpoint(5, v1::STEP_STATE_DONE, 1.0), 2)),
            "\r\033[K[1/2] step 5 done 1.0 s\n");
  EXPECT_EQ(printer.Clear(), "");
  printer.Render(Event(v1::JobEvent::KIND_STEP_STARTED, Checkpoint(6, v1::STEP_STATE_RUNNING)));
  EXPECT_EQ(printer.Clear(), "\r\033[K");
}

TEST(ProgressPrinterTest, SnapshotListsStepsAlreadyFinishedOnce) {
  ProgressPrinter printer(/*tty=*/false);
  v1::JobEvent snapshot;
  snapshot.set_kind(v1::JobEvent::KIND_SNAPSHOT);
  snapshot.mutable_job()->set_steps_total(3);
  *snapshot.mutable_job()->add_checkpoints() = Checkpoint(0, v1::STEP_STATE_SKIPPED);
  *snapshot.mutable_job()->add_checkpoints() = Checkpoint(10, v1::STEP_STATE_RUNNING);
  *snapshot.mutable_job()->add_checkpoints() = Checkpoint(20, v1::STEP_STATE_PENDING);
  EXPECT_EQ(printer.Render(snapshot), "[1/3] step 0 skipped (already stored)\n");
  EXPECT_EQ(printer.Render(
                Event(v1::JobEvent::KIND_STEP_FINISHED, Checkpoint(0, v1::STEP_STATE_SKIPPED), 3)),
            "");
  EXPECT_EQ(printer.Render(Event(v1::JobEvent::KIND_STEP_FINISHED,
                                 Checkpoint(10, v1::STEP_STATE_DONE, 2.0), 3)),
            "[2/3] step 10 done 2.0 s\n");
}

TEST(ProgressPrinterTest, SummaryCountsEachOutcome) {
  v1::Job job;
  job.set_id(7);
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_steps_total(3);
  *job.add_checkpoints() = Checkpoint(0, v1::STEP_STATE_DONE);
  *job.add_checkpoints() = Checkpoint(1, v1::STEP_STATE_SKIPPED);
  *job.add_checkpoints() = Checkpoint(2, v1::STEP_STATE_DONE);
  EXPECT_EQ(ProgressPrinter::Summary(job), "job 7 succeeded: 2 done, 1 skipped (3 checkpoints)\n");
  EXPECT_TRUE(ProgressPrinter::Succeeded(job));

  job.set_state(v1::JOB_STATE_FAILED);
  job.mutable_checkpoints(2)->set_state(v1::STEP_STATE_FAILED);
  job.set_error("1 checkpoint failed");
  EXPECT_EQ(ProgressPrinter::Summary(job),
            "job 7 failed: 1 done, 1 skipped, 1 failed (3 checkpoints): 1 checkpoint failed\n");
  EXPECT_FALSE(ProgressPrinter::Succeeded(job));
}

TEST(ProgressPrinterTest, SucceededNeedsEveryStepDoneOrSkipped) {
  v1::Job job;
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  *job.add_checkpoints() = Checkpoint(0, v1::STEP_STATE_CANCELLED);
  EXPECT_FALSE(ProgressPrinter::Succeeded(job));
  job.mutable_checkpoints(0)->set_state(v1::STEP_STATE_DONE);
  EXPECT_TRUE(ProgressPrinter::Succeeded(job));
  job.set_state(v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(ProgressPrinter::Succeeded(job));
}

}  // namespace
}  // namespace anisoscope::client
