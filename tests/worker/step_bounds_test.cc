// StepBounds: the memory cap, the errors that name it, and the flags that carry both.
#include "worker/step_bounds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/process_memory.h"
#include "worker/extractor_flags.h"

namespace anisoscope::worker {
namespace {

TEST(StepBoundsTest, TheCapRefusesAnAllocationBeyondIt) {
  // In a child: the cap is for the whole process.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // 256 MiB above what the process holds now (LibTorch's libraries hold much).
    if (!ApplyMemoryCap(DataSegmentBytes() + (256ull << 20)).ok()) _exit(2);
    try {
      std::vector<char> big(512ull << 20, 1);
      _exit(big[0] == 1 ? 3 : 4);  // allocated: the cap did not hold
    } catch (const std::bad_alloc&) {
      std::vector<char> small(16ull << 20, 1);  // below the cap: still fine
      _exit(small[0] == 1 ? 0 : 5);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(StepBoundsTest, TheDataSegmentIsReadAndACapJustAboveItIsNear) {
  const uint64_t now = DataSegmentBytes();
  ASSERT_GT(now, 0u);
  StepBounds bounds;
  EXPECT_FALSE(NearMemoryCap(bounds));  // no cap
  bounds.memory_max_bytes = now + (16ull << 20);
  EXPECT_TRUE(NearMemoryCap(bounds));
  bounds.memory_max_bytes = now + (1ull << 30);
  EXPECT_FALSE(NearMemoryCap(bounds));
}

TEST(StepBoundsTest, AllocationFailuresAreRecognisedAndTheErrorNamesTheFlag) {
  EXPECT_TRUE(IsAllocationFailure(absl::InternalError("checkpoint /x: std::bad_alloc")));
  EXPECT_TRUE(IsAllocationFailure(absl::InternalError(
      "LibTorch error: DefaultCPUAllocator: not enough memory: you tried to allocate 1 bytes")));
  EXPECT_TRUE(IsAllocationFailure(absl::ResourceExhaustedError("out of memory")));
  EXPECT_FALSE(IsAllocationFailure(absl::InvalidArgumentError("config.json: head_dim")));
  StepBounds bounds;
  bounds.memory_max_bytes = 3ull << 30;
  const std::string error = MemoryBoundError(bounds, absl::InternalError("std::bad_alloc"));
  EXPECT_THAT(error, ::testing::HasSubstr("--worker-memory-max allows (3.0 GiB)"));
  EXPECT_THAT(error, ::testing::HasSubstr("raise --worker-memory-max"));
}

TEST(StepBoundsTest, TheFlagsTakeSizesAndTheServerPassesThemOnUnchanged) {
  StepBounds bounds;
  analysis::TorchExtractorOptions extractor;
  CLI::App app;
  AddExtractorFlags(app, extractor, /*with_dtype=*/false);
  AddStepBoundFlags(app, bounds);
  app.parse("--worker-memory-max 2GiB --step-timeout 90 --threads 3", /*program_name_included=*/false);
  EXPECT_EQ(bounds.memory_max_bytes, 2ull << 30);
  EXPECT_EQ(bounds.step_timeout_seconds, 90);

  StepBounds passed;
  analysis::TorchExtractorOptions passed_extractor;
  CLI::App worker;
  AddExtractorFlags(worker, passed_extractor, /*with_dtype=*/false);
  AddStepBoundFlags(worker, passed);
  worker.parse(absl::StrJoin(WorkerEngineArgs(extractor, bounds), " "),
               /*program_name_included=*/false);
  EXPECT_EQ(passed.memory_max_bytes, bounds.memory_max_bytes);
  EXPECT_EQ(passed.step_timeout_seconds, bounds.step_timeout_seconds);
  EXPECT_EQ(passed_extractor.num_threads, 3);
}

}  // namespace
}  // namespace anisoscope::worker
