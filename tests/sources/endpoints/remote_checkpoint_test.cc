// A listed step on the wire and back: the worker's URLs come from its own endpoints, every
// name is checked again, and a bad field is named.
#include "sources/endpoints/remote_checkpoint.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "sources/fetch/fetch_plan.h"
#include "sources/listing/listing_paths.h"

namespace anisoscope::sources {
namespace {

constexpr char kCommit[] = "0123456789abcdef0123456789abcdef01234567";
const std::string kSha(64, 'a');

SourceEndpoints WorkerEndpoints() {
  SourceEndpoints endpoints;
  endpoints.hub_endpoint = "http://worker-hub:8080";
  endpoints.s3_endpoint = "http://worker-s3:9000";
  return endpoints;
}

listing::RemoteStep HubStep() {
  listing::RemoteStep step;
  step.step = 1000;
  step.name = "step1000";
  step.repo = "EleutherAI/pythia-14m";
  step.commit = kCommit;
  step.revision = "step1000";
  step.files = {{"config.json", 512, "", "0123abcd", "http://server-side/evil/config.json"},
                {"model.safetensors", 4096, kSha, kSha, "http://server-side/evil/model"},
                {"sub dir/tokenizer.json", 99, "", "beef", "http://x"}};
  return step;
}

TEST(RemoteCheckpointTest, HubRoundTripBuildsUrlsFromTheWorkersEndpoint) {
  const v1::RemoteCheckpoint wire = ToRemoteCheckpoint(HubStep(), v1::SOURCE_KIND_HUB);
  EXPECT_EQ(wire.kind(), v1::SOURCE_KIND_HUB);
  EXPECT_EQ(wire.files_size(), 3);
  EXPECT_EQ(wire.SerializeAsString().find("server-side"), std::string::npos);

  const absl::StatusOr<listing::RemoteStep> back =
      FromRemoteCheckpoint(wire, 1000, WorkerEndpoints());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->step, 1000);
  EXPECT_EQ(back->name, "step1000");
  EXPECT_EQ(back->repo, "EleutherAI/pythia-14m");
  EXPECT_EQ(back->commit, kCommit);
  EXPECT_EQ(back->revision, "step1000");
  ASSERT_EQ(back->files.size(), 3u);
  EXPECT_EQ(back->files[0].url,
            absl::StrCat("http://worker-hub:8080/EleutherAI/pythia-14m/resolve/", kCommit,
                         "/config.json"));
  EXPECT_EQ(back->files[1].sha256, kSha);
  EXPECT_EQ(back->files[1].size, 4096u);
  EXPECT_EQ(back->files[2].url,
            absl::StrCat("http://worker-hub:8080/EleutherAI/pythia-14m/resolve/", kCommit,
                         "/sub%20dir/tokenizer.json"));
  EXPECT_TRUE(fetch::PlanFetch(*back).ok());
}

TEST(RemoteCheckpointTest, S3RoundTripBuildsPathStyleUrls) {
  listing::RemoteStep step;
  step.name = "step20";
  step.repo = "my-bucket";
  step.revision = "runs/a b/step20/";
  step.files = {{"model.safetensors", 10, "", "\"abc123\"", "http://elsewhere"}};
  const v1::RemoteCheckpoint wire = ToRemoteCheckpoint(step, v1::SOURCE_KIND_S3);
  const absl::StatusOr<listing::RemoteStep> back =
      FromRemoteCheckpoint(wire, 20, WorkerEndpoints());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->commit.empty());
  ASSERT_EQ(back->files.size(), 1u);
  EXPECT_EQ(back->files[0].url,
            "http://worker-s3:9000/my-bucket/runs/a%20b/step20/model.safetensors");
  EXPECT_TRUE(fetch::PlanFetch(*back).ok());
}

TEST(RemoteCheckpointTest, UrlPrefixesAreTheListingsOwn) {
  EXPECT_EQ(listing::HubFileUrlPrefix("https://h", "o/n", kCommit),
            absl::StrCat("https://h/o/n/resolve/", kCommit, "/"));
  EXPECT_EQ(listing::S3FileUrlPrefix("http://s", "b", "p/q r/"), "http://s/b/p/q%20r/");
}

// Mutates a valid Hub step and expects INVALID_ARGUMENT naming `field`.
void ExpectRefused(const std::function<void(v1::RemoteCheckpoint&)>& mutate,
                   const std::string& field) {
  v1::RemoteCheckpoint wire = ToRemoteCheckpoint(HubStep(), v1::SOURCE_KIND_HUB);
  mutate(wire);
  const absl::StatusOr<listing::RemoteStep> back = FromRemoteCheckpoint(wire, 1, WorkerEndpoints());
  ASSERT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_NE(back.status().message().find(absl::StrCat("RemoteCheckpoint.", field)),
            std::string::npos)
      << back.status();
}

TEST(RemoteCheckpointTest, BadFieldsAreRefusedByName) {
  ExpectRefused([](auto& w) { w.set_kind(v1::SOURCE_KIND_UNSPECIFIED); }, "kind");
  ExpectRefused([](auto& w) { w.set_kind(static_cast<v1::SourceKind>(77)); }, "kind");
  ExpectRefused([](auto& w) { w.set_repo("../../etc"); }, "repo");
  ExpectRefused([](auto& w) { w.set_repo(""); }, "repo");
  ExpectRefused([](auto& w) { w.set_repo("evil.com/x@y"); }, "repo");
  ExpectRefused([](auto& w) { w.set_commit(""); }, "commit");
  ExpectRefused([](auto& w) { w.set_commit("main"); }, "commit");
  ExpectRefused([](auto& w) { w.set_commit(std::string(40, 'A')); }, "commit");
  ExpectRefused([](auto& w) { w.set_revision("../x"); }, "revision");
  ExpectRefused([](auto& w) { w.clear_files(); }, "files");
  ExpectRefused([](auto& w) { w.mutable_files(1)->set_sha256("xyz"); }, "files[1].sha256");
  ExpectRefused([](auto& w) { w.mutable_files(0)->set_etag("../blob"); }, "files[0].etag");
  ExpectRefused([](auto& w) { w.mutable_files(2)->set_path("config.json"); }, "files[2].path");
}

TEST(RemoteCheckpointTest, HostileFileNamesAreRefused) {
  for (const std::string& name :
       {std::string("../escape"), std::string("/etc/passwd"), std::string("a/../../b"),
        std::string("a//b"), std::string("./a"), std::string("a\\b"), std::string("a\nb"),
        std::string("a\0b", 3), std::string(""), std::string("x.incomplete"),
        std::string("http://evil/x")}) {
    ExpectRefused([&](auto& w) { w.mutable_files(0)->set_path(name); }, "files[0].path");
  }
}

TEST(RemoteCheckpointTest, S3StepsRefuseACommitAndABadFolder) {
  listing::RemoteStep step;
  step.repo = "bucket";
  step.revision = "runs/step1/";
  step.files = {{"model.safetensors", 10, "", "e1", ""}};
  v1::RemoteCheckpoint wire = ToRemoteCheckpoint(step, v1::SOURCE_KIND_S3);
  wire.set_commit(kCommit);
  EXPECT_EQ(FromRemoteCheckpoint(wire, 1, WorkerEndpoints()).status().code(),
            absl::StatusCode::kInvalidArgument);
  wire.clear_commit();
  for (const char* folder : {"runs/step1", "../step1/", "/abs/", "", "a//"}) {
    wire.set_revision(folder);
    const auto back = FromRemoteCheckpoint(wire, 1, WorkerEndpoints());
    EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument) << folder;
    EXPECT_NE(back.status().message().find("RemoteCheckpoint.revision"), std::string::npos);
  }
  wire.set_revision("runs/step1/");
  wire.set_repo("Not_A_Bucket!");
  EXPECT_NE(FromRemoteCheckpoint(wire, 1, WorkerEndpoints())
                .status()
                .message()
                .find("RemoteCheckpoint.repo"),
            std::string::npos);
}

TEST(RemoteCheckpointTest, DescribeNamesRepoAndRevision) {
  v1::RemoteCheckpoint wire = ToRemoteCheckpoint(HubStep(), v1::SOURCE_KIND_HUB);
  EXPECT_EQ(DescribeRemoteCheckpoint(wire), "hub:EleutherAI/pythia-14m@step1000");
  wire.set_kind(v1::SOURCE_KIND_S3);
  wire.set_repo("b");
  wire.set_revision("p/step1/");
  EXPECT_EQ(DescribeRemoteCheckpoint(wire), "s3://b/p/step1/");
}

}  // namespace
}  // namespace anisoscope::sources
