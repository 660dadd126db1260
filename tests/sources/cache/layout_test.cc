// The cache's files are laid out exactly as huggingface_hub lays its cache out
// (src/huggingface_hub/file_download.py), so a user's ~/.cache/huggingface/hub is reused and
// theirs reads ours. huggingface_hub is not installed here, so the layout is asserted
// literally, each assertion citing the upstream function it mirrors.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/common/test_temp_dir.h"
#include "tests/sources/cache/cache_test_util.h"

namespace anisoscope::cache {
namespace {

using testing::ContentOf;
using testing::FakeCommit;
using testing::FakeSha256;
using testing::File;
using testing::HubStep;
using testing::ReadAll;

std::string LinkOf(const std::filesystem::path& path) {
  EXPECT_TRUE(std::filesystem::is_symlink(path)) << path;
  return std::filesystem::read_symlink(path).string();
}

std::string TextOf(const std::filesystem::path& path) { return testing::ReadAll(path); }

TEST(SourceCacheLayout, HubStepLandsInHuggingFaceLayout) {
  TestTempDir temp;
  auto cache = SourceCache::Create({temp.path(), 1 << 20}).value();
  const std::string sha1 = FakeSha256("config").substr(0, 40);  // a git blob's sha1
  const CacheStep step =
      HubStep("EleutherAI/pythia-160m", "step1000",
              {StepFile{"config.json", sha1, 100}, File("model.safetensors", "weights", 3000),
               File("sub/dir/tokenizer.json", "tokenizer", 200)},
              "step1000");
  auto pin = cache->Pin(step).value();
  const std::filesystem::path snapshot = testing::Fetch(*cache, pin).value();

  // repo_folder_name(): "models" + "--".join(repo_id.split("/")).
  const std::filesystem::path repo = temp.path() / "models--EleutherAI--pythia-160m";
  EXPECT_EQ(snapshot, repo / "snapshots" / FakeCommit("step1000"));
  // _hf_hub_download_to_cache_dir: blob_path = storage_folder/blobs/<etag>.
  for (const StepFile& file : step.files) {
    EXPECT_TRUE(std::filesystem::is_regular_file(repo / "blobs" / file.etag)) << file.path;
    EXPECT_EQ(std::filesystem::file_size(repo / "blobs" / file.etag), file.size);
    // Read through the snapshot, as the engine reads a checkpoint folder.
    EXPECT_EQ(ReadAll(snapshot / file.path), ContentOf(file)) << file.path;
  }
  // _create_symlink(): os.symlink(os.path.relpath(blob, dirname(pointer)), pointer).
  EXPECT_EQ(LinkOf(snapshot / "config.json"), "../../blobs/" + sha1);
  EXPECT_EQ(LinkOf(snapshot / "model.safetensors"), "../../blobs/" + FakeSha256("weights"));
  EXPECT_EQ(LinkOf(snapshot / "sub/dir/tokenizer.json"),
            "../../../../blobs/" + FakeSha256("tokenizer"));
  // _cache_commit_hash_for_specific_revision(): refs/<revision> holds the commit, no newline.
  EXPECT_EQ(TextOf(repo / "refs" / "step1000"), FakeCommit("step1000"));
  // Nothing else in the repo folder: no .incomplete left, no bookkeeping beside the blobs.
  std::set<std::string> top;
  for (const auto& entry : std::filesystem::directory_iterator(repo)) {
    top.insert(entry.path().filename().string());
  }
  EXPECT_EQ(top, (std::set<std::string>{"blobs", "refs", "snapshots"}));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(repo / "blobs"), {}), 3);
  // _create_cachedir_tag() writes CACHEDIR.TAG; the bookkeeping hides under .locks/, which
  // scan_cache_dir() skips.
  EXPECT_TRUE(std::filesystem::is_regular_file(temp.path() / "CACHEDIR.TAG"));
  for (const auto& entry : std::filesystem::directory_iterator(temp.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "models--EleutherAI--pythia-160m" || name == "CACHEDIR.TAG" ||
                name == ".locks")
        << name;
  }
}

TEST(SourceCacheLayout, NestedRevisionAndLegacyRepoId) {
  TestTempDir temp;
  auto cache = SourceCache::Create({temp.path(), 1 << 20}).value();
  // A legacy id without an organisation ("gpt2") and a PR ref ("refs/pr/1"), which
  // huggingface_hub stores under refs/refs/pr/1.
  const CacheStep step = HubStep("gpt2", "pr", {File("a.bin", "a", 10)}, "refs/pr/1");
  auto pin = cache->Pin(step).value();
  ASSERT_TRUE(testing::Fetch(*cache, pin).ok());
  EXPECT_EQ(TextOf(temp.path() / "models--gpt2" / "refs" / "refs" / "pr" / "1"), FakeCommit("pr"));
}

TEST(SourceCacheLayout, UsersExistingHuggingFaceCacheIsReadWithNoDownload) {
  TestTempDir temp;
  // A cache as huggingface_hub leaves it, written by hand.
  const std::filesystem::path repo = temp.path() / "models--google--multiberts-seed_0-step_20k";
  const std::string commit = FakeCommit("multiberts");
  const StepFile weights = File("pytorch_model.bin", "mb-weights", 512);
  const StepFile vocab = File("vocab/vocab.txt", "mb-vocab", 64);
  std::filesystem::create_directories(repo / "blobs");
  std::filesystem::create_directories(repo / "snapshots" / commit / "vocab");
  std::filesystem::create_directories(repo / "refs");
  for (const StepFile& file : {weights, vocab}) {
    std::ofstream(repo / "blobs" / file.etag, std::ios::binary) << ContentOf(file);
  }
  std::filesystem::create_symlink("../../blobs/" + weights.etag,
                                  repo / "snapshots" / commit / "pytorch_model.bin");
  std::filesystem::create_symlink("../../../blobs/" + vocab.etag,
                                  repo / "snapshots" / commit / "vocab/vocab.txt");
  std::ofstream(repo / "refs" / "main") << commit;

  auto cache = SourceCache::Create({temp.path(), 1 << 20}).value();
  CacheStep step;
  step.repo = HubModelRepo("google/multiberts-seed_0-step_20k").value();
  step.snapshot = commit;
  step.revision = "main";
  step.files = {weights, vocab};
  auto pin = cache->Pin(step).value();
  EXPECT_EQ(cache->FindComplete(step).value(), repo / "snapshots" / commit);
  EXPECT_EQ(cache->metrics().hits, 1u);
  EXPECT_EQ(cache->metrics().misses, 0u);
  // Every file is already there: BeginFile hands out no download.
  for (const StepFile& file : step.files) {
    EXPECT_FALSE(cache->BeginFile(pin, file).value().has_value()) << file.path;
  }
  EXPECT_EQ(cache->Refresh().value().bytes_cached, 512u + 64u);
}

TEST(SourceCacheLayout, S3StepHasTheSameShapeUnderS3Bucket) {
  TestTempDir temp;
  auto cache = SourceCache::Create({temp.path(), 1 << 20}).value();
  CacheStep step;
  step.repo = S3BucketRepo("my-runs").value();
  step.snapshot = S3SnapshotName("runs/gpt/step100/");
  step.files = {
      StepFile{"model.safetensors", NormalizeEtag("\"9b2cf535f27731c974343645a3985328-2\""), 40}};
  auto pin = cache->Pin(step).value();
  const std::filesystem::path snapshot = testing::Fetch(*cache, pin).value();
  EXPECT_EQ(step.snapshot, "runs%2Fgpt%2Fstep100");
  EXPECT_EQ(snapshot, temp.path() / "s3--my-runs" / "snapshots" / "runs%2Fgpt%2Fstep100");
  EXPECT_EQ(LinkOf(snapshot / "model.safetensors"),
            "../../blobs/9b2cf535f27731c974343645a3985328-2");
}

TEST(SourceCacheLayout, CompleteStepIsFoundByAFreshProcessWithNoWork) {
  TestTempDir temp;
  const CacheStep step = HubStep("org/m", "s", {File("w.bin", "w", 100)}, "main");
  {
    auto cache = SourceCache::Create({temp.path(), 1 << 20}).value();
    EXPECT_TRUE(absl::IsNotFound(cache->FindComplete(step).status()));
    EXPECT_EQ(cache->metrics().misses, 1u);
    ASSERT_TRUE(testing::PinAndFetch(*cache, step).ok());
  }
  auto restarted = SourceCache::Create({temp.path(), 1 << 20}).value();
  const auto blob = temp.path() / "models--org--m" / "blobs" / step.files[0].etag;
  const auto before = std::filesystem::last_write_time(blob);
  EXPECT_TRUE(restarted->FindComplete(step).ok());
  EXPECT_EQ(restarted->metrics().hits, 1u);
  EXPECT_EQ(std::filesystem::last_write_time(blob), before);  // read, never rewritten
  EXPECT_EQ(restarted->metrics().bytes_cached, 100u);
}

}  // namespace
}  // namespace anisoscope::cache
