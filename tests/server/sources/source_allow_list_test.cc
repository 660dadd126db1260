// --allow-source and a source's shape: entries parsed (a bad one named), sources matched by
// repo, org, pattern and whole S3 segments, an empty list allowing nothing, a namespace's list
// narrowing the server's, and a malformed source named by its field.
#include "server/sources/source_allow_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/server_options.h"
#include "server/sources/source_description.h"
#include "server/sources/source_lister.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;
using ::testing::HasSubstr;

pb::CheckpointSource Hub(const std::string& repo) {
  pb::CheckpointSource source;
  source.set_hub(repo);
  return source;
}
pb::CheckpointSource HubRepos(const std::string& pattern) {
  pb::CheckpointSource source;
  source.set_hub_repos(pattern);
  return source;
}
pb::CheckpointSource S3(const std::string& url) {
  pb::CheckpointSource source;
  source.set_s3(url);
  return source;
}

SourceAllowList Parsed(const std::vector<std::string>& entries) {
  absl::StatusOr<SourceAllowList> list = SourceAllowList::Parse(entries);
  EXPECT_TRUE(list.ok()) << list.status();
  return list.ok() ? *std::move(list) : SourceAllowList();
}

TEST(SourceAllowListTest, MalformedEntriesAreRefusedNamingTheEntryAndTheFlag) {
  for (const std::string entry :
       {"EleutherAI/pythia", "hub:", "hub:pythia", "hub:*/x", "hub:a/b/c", "hub:a--b/c", "s3://",
        "s3://B/", "s3://bucket/prefix", "s3://bucket/../x/", "gs://bucket/", "hub:org/**"}) {
    absl::StatusOr<SourceAllowList> list = SourceAllowList::Parse({entry});
    ASSERT_FALSE(list.ok()) << entry;
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument) << entry;
    EXPECT_THAT(list.status().message(), HasSubstr("--allow-source")) << entry;
  }
  EXPECT_THAT(SourceAllowList::Parse({"hub:ok/fine", "s3://bucket/prefix"}).status().message(),
              HasSubstr("s3://bucket/prefix"));
}

TEST(SourceAllowListTest, HubEntriesAllowTheirRepoOrEveryRepoOfTheirOrg) {
  const SourceAllowList list = Parsed({"hub:EleutherAI/pythia-14m", "hub:google/*"});
  EXPECT_TRUE(list.Check(Hub("EleutherAI/pythia-14m")).ok());
  EXPECT_FALSE(list.Check(Hub("EleutherAI/pythia-70m")).ok());
  EXPECT_FALSE(list.Check(Hub("EleutherAI/pythia-14m-deduped")).ok());
  EXPECT_TRUE(list.Check(Hub("google/multiberts-seed_0")).ok());
  EXPECT_FALSE(list.Check(Hub("googlex/model")).ok());
  // A pattern's repos all lie under ORG/*, or the pattern is allowed as written.
  EXPECT_TRUE(list.Check(HubRepos("google/multiberts-seed_0-step_{}k")).ok());
  EXPECT_FALSE(list.Check(HubRepos("EleutherAI/pythia-14m{}")).ok());
  const SourceAllowList pattern = Parsed({"hub:google/multiberts-seed_0-step_{}k"});
  EXPECT_TRUE(pattern.Check(HubRepos("google/multiberts-seed_0-step_{}k")).ok());
  EXPECT_FALSE(pattern.Check(HubRepos("google/multiberts-seed_1-step_{}k")).ok());
  EXPECT_FALSE(pattern.Check(Hub("google/multiberts-seed_0-step_20k")).ok());
}

TEST(SourceAllowListTest, S3EntriesMatchWholeSegmentsOfTheirPrefix) {
  const SourceAllowList list = Parsed({"s3://team/runs/", "s3://open"});
  EXPECT_EQ(list.entries()[1], "s3://open/");
  EXPECT_TRUE(list.Check(S3("s3://team/runs/")).ok());
  EXPECT_TRUE(list.Check(S3("s3://team/runs/gpt-7/")).ok());
  EXPECT_FALSE(list.Check(S3("s3://team/runs-old/")).ok());
  EXPECT_FALSE(list.Check(S3("s3://team/")).ok());
  EXPECT_FALSE(list.Check(S3("s3://team2/runs/")).ok());
  EXPECT_TRUE(list.Check(S3("s3://open")).ok());
  EXPECT_TRUE(list.Check(S3("s3://open/any/thing/")).ok());
  EXPECT_FALSE(list.Check(Hub("team/runs")).ok());
}

TEST(SourceAllowListTest, RefusalIsPermissionDeniedNamingTheSourceAndTheFlag) {
  const absl::Status none = SourceAllowList().Check(Hub("EleutherAI/pythia-14m"));
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(none.message(), HasSubstr("hub:EleutherAI/pythia-14m"));
  EXPECT_THAT(none.message(), HasSubstr("no --allow-source"));
  const absl::Status other = Parsed({"s3://abc/b/"}).Check(S3("s3://abc/c/"));
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(other.message(), HasSubstr("s3://abc/c/"));
  EXPECT_THAT(other.message(), HasSubstr("--allow-source"));
}

TEST(SourceAllowListTest, ANamespacesSourcesNarrowTheServers) {
  SourceLister::Options options;
  options.allowed = Parsed({"hub:EleutherAI/*"});
  auto lister = SourceLister::Create(std::move(options));
  ASSERT_TRUE(lister.ok());
  const SourceAllowList none;
  const SourceAllowList narrow = Parsed({"hub:EleutherAI/pythia-14m"});
  const SourceAllowList wider = Parsed({"hub:google/*"});
  EXPECT_TRUE((*lister)->Check(Hub("EleutherAI/pythia-70m"), none).ok());
  EXPECT_TRUE((*lister)->Check(Hub("EleutherAI/pythia-14m"), narrow).ok());
  const absl::Status narrowed = (*lister)->Check(Hub("EleutherAI/pythia-70m"), narrow);
  EXPECT_EQ(narrowed.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(narrowed.message(), HasSubstr("namespace"));
  // A namespace cannot widen the server's list.
  const absl::Status widened = (*lister)->Check(Hub("google/bert"), wider);
  EXPECT_EQ(widened.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(widened.message(), HasSubstr("server's --allow-source"));
}

TEST(SourceDescriptionTest, AMalformedSourceIsNamedByItsField) {
  const auto code_and_field = [](const pb::CheckpointSource& source, const std::string& field) {
    const absl::Status status = ValidateSource(source);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(status.message(), HasSubstr(field));
  };
  code_and_field(pb::CheckpointSource(), "source");
  code_and_field(Hub("no-org"), "source.hub");
  code_and_field(Hub("../etc"), "source.hub");
  code_and_field(HubRepos("google/multiberts"), "source.hub_repos");
  code_and_field(HubRepos("google/{}-{}"), "source.hub_repos");
  code_and_field(S3("http://bucket/x/"), "source.s3");
  pb::CheckpointSource revisions = Hub("a/b");
  revisions.add_revisions("");
  code_and_field(revisions, "source.revisions");
  pb::CheckpointSource revision = Hub("a/b");
  revision.set_revision("main");
  code_and_field(revision, "source.revision");
  pb::CheckpointSource ok = HubRepos("google/multiberts-seed_0-step_{}k");
  ok.set_revision("main");
  ok.add_revisions("20");
  EXPECT_TRUE(ValidateSource(ok).ok());
  EXPECT_EQ(DescribeSource(ok), "hub:google/multiberts-seed_0-step_{}k");
  EXPECT_EQ(DescribeSource(S3("s3://b/p/")), "s3://b/p/");
}

TEST(AllowSourceFlagTest, TheFlagRepeatsAndABadEntryIsRefusedNamingIt) {
  std::vector<const char*> args = {"anisoscope-server", "--allow-root",     "/data",
                                   "--allow-source",    "hub:EleutherAI/*", "--allow-source",
                                   "s3://runs/team/"};
  absl::StatusOr<ServerOptions> options =
      ParseServerOptions(static_cast<int>(args.size()), args.data());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->allow_sources,
            (std::vector<std::string>{"hub:EleutherAI/*", "s3://runs/team/"}));
  std::vector<const char*> none = {"anisoscope-server", "--allow-root", "/data"};
  EXPECT_TRUE(ParseServerOptions(3, none.data())->allow_sources.empty());
  std::vector<const char*> bad = {"anisoscope-server", "--allow-root", "/data", "--allow-source",
                                  "EleutherAI/pythia"};
  absl::StatusOr<ServerOptions> refused = ParseServerOptions(5, bad.data());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("EleutherAI/pythia"));
}

}  // namespace
}  // namespace anisoscope::server
