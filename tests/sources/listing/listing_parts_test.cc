// The listing's pure parts: which files are fetched, names checked, Link and XML parsing,
// step selection and duplicate keys.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sources/listing/checkpoint_files.h"
#include "sources/listing/duplicates.h"
#include "sources/listing/hub_json.h"
#include "sources/listing/listing_paths.h"
#include "sources/listing/s3_listing.h"
#include "sources/listing/s3_xml.h"
#include "sources/listing/step_files.h"
#include "sources/listing/step_names.h"

namespace anisoscope::listing {
namespace {

TEST(CheckpointFilesTest, OnlyWhatACheckpointNeedsIsFetched) {
  for (const char* name : {"config.json", "model.safetensors", "model-00001-of-00002.safetensors",
                           "model.safetensors.index.json", "pytorch_model.bin",
                           "pytorch_model-00001-of-00003.bin", "pytorch_model.bin.index.json",
                           "tokenizer.json", "vocab.txt", "merges.txt", "spiece.model"}) {
    EXPECT_TRUE(IsCheckpointFile(name)) << name;
  }
  for (const char* name : {".gitattributes", "README.md", "flax_model.msgpack", "tf_model.h5",
                           "rust_model.ot", "model.onnx", "optimizer.bin", "optimizer.pt",
                           "training_args.bin", "rng_state.pth", "sub/model.safetensors"}) {
    EXPECT_FALSE(IsCheckpointFile(name)) << name;
  }
  EXPECT_TRUE(IsWeightFile("model.safetensors"));
  EXPECT_FALSE(IsWeightFile("model.safetensors.index.json"));
}

TEST(ListingPathsTest, HostileNamesAreRefused) {
  for (const char* name : {"../x", "/abs", "a/../../b", "a//b", "a\\b", "", ".", "a/./b"}) {
    EXPECT_EQ(CheckListedPath(name, "hub:o/n").code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(CheckListedPath(std::string("a\0b", 3), "w").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckListedPath("sub/model.safetensors", "w").ok());
}

TEST(ListingPathsTest, PercentEncodingAndLinks) {
  EXPECT_EQ(PercentEncode("a b/c+d", true), "a%20b/c%2Bd");
  EXPECT_EQ(PercentEncode("runs/a/", false), "runs%2Fa%2F");
  EXPECT_EQ(NextLink({R"(<http://h/api?cursor=x>; rel="next")"}), "http://h/api?cursor=x");
  EXPECT_EQ(NextLink({R"(<http://h/p1>; rel="prev", <http://h/p3>; rel="next")"}), "http://h/p3");
  EXPECT_FALSE(NextLink({R"(<http://h/p1>; rel="prev")"}).has_value());
  EXPECT_FALSE(NextLink({}).has_value());
  EXPECT_TRUE(MatchesGlob("step1*", "step1000"));
  EXPECT_FALSE(MatchesGlob("step1*", "step2000"));
}

TEST(StepNamesTest, NamesFollowTheLocalFolderRules) {
  absl::StatusOr<SelectedSteps> selected = SelectSteps(
      {"main", "stage1-step1000-tokens4B", "checkpoint-200", "ckpt_042", "step_20k", "dev"}, {},
      "hub:o/n");
  ASSERT_TRUE(selected.ok()) << selected.status();
  ASSERT_EQ(selected->steps.size(), 4u);
  EXPECT_EQ(selected->steps[0].step, 42);
  EXPECT_EQ(selected->steps[1].step, 200);
  EXPECT_EQ(selected->steps[2].step, 1000);
  EXPECT_EQ(selected->steps[3].step, 20000);
  EXPECT_EQ(selected->without_step, (std::vector<std::string>{"dev", "main"}));
}

TEST(StepFilesTest, ADuplicatePathOrNoWeightsIsAProblem) {
  EXPECT_EQ(
      StepFiles({{"model.safetensors", 1, "", "e"}, {"model.safetensors", 1, "", "e"}}, "u/", "w")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StepFiles({{"config.json", 1, "", "e"}}, "u/", "w").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DuplicatesTest, S3MultipartEtagsAreNeverCalledDuplicates) {
  RemoteFile single{"model.safetensors", 5, "", "0123456789abcdef0123456789abcdef", ""};
  RemoteFile multipart{"model.safetensors", 5, "", "0123456789abcdef0123456789abcdef-2", ""};
  EXPECT_TRUE(ContentKey(single, true).has_value());
  EXPECT_FALSE(ContentKey(multipart, true).has_value());
  RemoteStep a{1, "a", "b", "", "", {single}};
  RemoteStep b{2, "b", "b", "", "", {single}};
  RemoteStep c{3, "c", "b", "", "", {multipart}};
  RemoteStep d{4, "d", "b", "", "", {multipart}};
  const std::vector<DuplicateGroup> groups = FindDuplicates({a, b, c, d}, true);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].names, (std::vector<std::string>{"a", "b"}));
}

TEST(S3XmlTest, NamespacesAreIgnoredAndPagesRead) {
  const std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://doc.s3.amazonaws.com/2006-03-01/">
  <Name>b</Name><Prefix>runs/</Prefix><KeyCount>2</KeyCount>
  <IsTruncated>true</IsTruncated><NextContinuationToken>tok/en</NextContinuationToken>
  <Contents><Key>runs/step1/model.safetensors</Key><Size>5</Size>
    <ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag></Contents>
  <CommonPrefixes><Prefix>runs/step2/</Prefix></CommonPrefixes>
</ListBucketResult>)";
  absl::StatusOr<S3ListPage> page = ParseListObjectsV2(xml, "s3://b/runs/");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "runs/step1/model.safetensors");
  EXPECT_EQ(page->objects[0].size, 5u);
  EXPECT_EQ(page->objects[0].etag, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(page->common_prefixes, std::vector<std::string>{"runs/step2/"});
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "tok/en");
  EXPECT_EQ(ParseListObjectsV2("<Error/>", "w").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseListObjectsV2("not xml <", "w").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HubJsonTest, MalformedAnswersAreErrorsNotCrashes) {
  EXPECT_FALSE(ParseHubRefs("[]", "w").ok());
  EXPECT_FALSE(ParseHubRefs("{\"branches\": [{\"name\": 1}]}", "w").ok());
  EXPECT_FALSE(ParseHubTreePage("{}", "w").ok());
  EXPECT_FALSE(
      ParseHubTreePage(R"([{"type": "file", "path": "a", "size": -1, "oid": "x"}])", "w").ok());
  absl::StatusOr<std::vector<HubTreeFile>> page = ParseHubTreePage(
      R"([{"type": "directory", "path": "d", "oid": "t", "size": 0},
          {"type": "file", "path": "m.safetensors", "oid": "g", "size": 132,
           "lfs": {"oid": "s", "size": 9, "pointerSize": 132}}])",
      "w");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].size, 9u);
  EXPECT_EQ((*page)[0].sha256, "s");
}

TEST(S3UrlTest, BucketAndPrefixAreChecked) {
  absl::StatusOr<S3Location> location = ParseS3Url("s3://ckpt/runs/a/");
  ASSERT_TRUE(location.ok()) << location.status();
  EXPECT_EQ(location->bucket, "ckpt");
  EXPECT_EQ(location->prefix, "runs/a/");
  EXPECT_TRUE(ParseS3Url("s3://ckpt").ok());
  EXPECT_FALSE(ParseS3Url("s3://ckpt/runs").ok());
  EXPECT_FALSE(ParseS3Url("s3://ckpt/../x/").ok());
  EXPECT_FALSE(ParseS3Url("http://ckpt/").ok());
}

}  // namespace
}  // namespace anisoscope::listing
