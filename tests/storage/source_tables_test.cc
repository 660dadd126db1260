// Remote sources in the store (issue 38, schema 10): a job's source and each checkpoint's
// remote descriptor kept as opaque bytes, a listed duplicate or problem stored in its first
// state, where each stored step came from, each namespace's sources, and a version 9 file
// migrated with every row kept.
#include <gtest/gtest.h>

#include <string>

#include "storage/metrics_store.h"
#include "storage/schema.h"
#include "storage/sqlite_db.h"
#include "tests/storage/store_test_util.h"

namespace anisoscope::storage {
namespace {

using testing::MakeStep;
using testing::RawCount;
using testing::TempDir;

// Bytes as a serialized message may hold them: NULs and high bytes included.
const std::string kSourceBytes("\x0a\x05o/n\0m\xff", 8);
const std::string kRemoteBytes("\x08\x01\x12\x03o/n\0\x80", 9);

TEST(SourceTablesTest, AJobKeepsItsSourceAndEachCheckpointItsRemoteBytesAndFirstState) {
  TempDir dir;
  auto store = MetricsStore::Open({dir.File("metrics.db")});
  ASSERT_OK(store.status());
  JobSpec spec;
  spec.run = "pythia";
  spec.source = kSourceBytes;
  CheckpointSpec pending{1000, "hub:o/n@step1000", kRemoteBytes};
  pending.revision = "step1000";
  pending.commit = std::string(40, 'c');
  CheckpointSpec skipped{2000,
                         "hub:o/n@step2000",
                         kRemoteBytes,
                         StepState::kSkipped,
                         "the same weight files as step 1000",
                         1000};
  CheckpointSpec failed{3000, "hub:o/n@step3000", "", StepState::kFailed, "no weights", -1};
  spec.checkpoints = {pending, skipped, failed};
  auto id = (*store)->CreateJob(spec, "");
  ASSERT_OK(id.status());
  auto job = (*store)->GetJob(*id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->spec.source, kSourceBytes);
  ASSERT_EQ(job->checkpoints.size(), 3u);
  EXPECT_EQ(job->checkpoints[0].remote, kRemoteBytes);
  EXPECT_EQ(job->checkpoints[0].state, StepState::kPending);
  EXPECT_EQ(job->checkpoints[0].path, "hub:o/n@step1000");
  EXPECT_EQ(job->checkpoints[0].revision, "step1000");  // kept as text: nothing parses remote
  EXPECT_EQ(job->checkpoints[0].commit, std::string(40, 'c'));
  EXPECT_TRUE(job->checkpoints[2].revision.empty());
  EXPECT_EQ(job->checkpoints[1].state, StepState::kSkipped);
  EXPECT_EQ(job->checkpoints[1].duplicate_of, 1000);
  EXPECT_EQ(job->checkpoints[1].error, "the same weight files as step 1000");
  EXPECT_EQ(job->checkpoints[2].state, StepState::kFailed);
  EXPECT_EQ(job->checkpoints[2].error, "no weights");
  EXPECT_TRUE(job->checkpoints[2].remote.empty());
  // A followed source's new steps carry theirs too.
  ASSERT_OK((*store)->AddJobCheckpoints(*id, {{4000, "hub:o/n@step4000", kRemoteBytes}}).status());
  job = (*store)->GetJob(*id);
  ASSERT_OK(job.status());
  ASSERT_EQ(job->checkpoints.size(), 4u);
  EXPECT_EQ(job->checkpoints[3].remote, kRemoteBytes);
}

TEST(SourceTablesTest, AStoredStepRecordsWhereItCameFromAndRunsListIt) {
  TempDir dir;
  auto store = MetricsStore::Open({dir.File("metrics.db")});
  ASSERT_OK(store.status());
  StepResult local = MakeStep("r", "p", 100);
  ASSERT_OK((*store)->WriteStep(local, false));
  StepResult remote = MakeStep("r", "p", 200);
  remote.origin_source = "hub:EleutherAI/pythia-14m";
  remote.origin_revision = "step200";
  remote.origin_commit = std::string(40, 'a');
  ASSERT_OK((*store)->WriteStep(remote, false));
  auto runs = (*store)->ListRuns(kDefaultNamespace);
  ASSERT_OK(runs.status());
  ASSERT_EQ(runs->size(), 1u);
  ASSERT_EQ((*runs)[0].origins.size(), 1u);  // the folder's step has none
  const StepOriginRecord& origin = (*runs)[0].origins[0];
  EXPECT_EQ(origin.step, 200);
  EXPECT_EQ(origin.source, "hub:EleutherAI/pythia-14m");
  EXPECT_EQ(origin.revision, "step200");
  EXPECT_EQ(origin.commit, std::string(40, 'a'));
}

TEST(SourceTablesTest, NamespaceSourcesAreReplacedListedAndClearedApartFromRoots) {
  TempDir dir;
  auto store = MetricsStore::Open({dir.File("metrics.db")});
  ASSERT_OK(store.status());
  ASSERT_OK((*store)->SetNamespaceRoots("team", {"/data"}));
  ASSERT_OK((*store)->SetNamespaceSources("team", {"hub:EleutherAI/*", "s3://b/runs/"}));
  auto sources = (*store)->NamespaceSources("team");
  ASSERT_OK(sources.status());
  EXPECT_EQ(*sources, (std::vector<std::string>{"hub:EleutherAI/*", "s3://b/runs/"}));
  auto listed = (*store)->ListNamespaceSources();
  ASSERT_OK(listed.status());
  ASSERT_EQ(listed->count("team"), 1u);
  ASSERT_OK((*store)->SetNamespaceSources("team", {}));
  EXPECT_TRUE((*store)->NamespaceSources("team")->empty());
  EXPECT_EQ(*(*store)->NamespaceRoots("team"), (std::vector<std::string>{"/data"}));
  EXPECT_FALSE((*store)->SetNamespaceSources("", {"hub:a/b"}).ok());
}

TEST(SourceTablesTest, VersionNineJobsCheckpointsAndStepsMigrateWithEmptySources) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    auto db = SqliteDb::Open({path});
    ASSERT_OK(db.status());
    ASSERT_OK(MigrateSchema(db->get(), 9));
    ASSERT_OK((*db)->Exec(R"sql(
INSERT INTO runs (id, namespace, name, model_family, num_layers, num_heads, head_dim, created_at)
  VALUES (7, 'default', 'bert', 'bert', 1, 1, 2, '2026-01-01T00:00:00Z');
INSERT INTO probes (namespace, id, description, num_samples, num_tokens)
  VALUES ('default', 'p', 'probe', 2, 8);
INSERT INTO steps (id, run_id, probe_id, step, checkpoint_path, checkpoint_bytes, seconds,
                   stored_at) VALUES (1, 7, 'p', 100, '/c/100', 10, 1.5, 'x');
INSERT INTO jobs (id, namespace, run, spec_json, state, created_at, updated_at)
  VALUES (3, 'default', 'bert', '{"run":"bert","checkpoints":[{"step":100,"path":"/c/100"}]}',
          'queued', 'x', 'x');
INSERT INTO checkpoints (job_id, step, path, state) VALUES (3, 100, '/c/100', 'pending');
)sql"));
  }
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), LatestSchemaVersion());
  auto job = (*store)->GetJob(3);
  ASSERT_OK(job.status());
  EXPECT_TRUE(job->spec.source.empty());
  ASSERT_EQ(job->checkpoints.size(), 1u);
  EXPECT_TRUE(job->checkpoints[0].remote.empty());
  EXPECT_TRUE(job->checkpoints[0].revision.empty());
  EXPECT_TRUE(job->checkpoints[0].commit.empty());
  EXPECT_EQ(job->checkpoints[0].path, "/c/100");
  auto runs = (*store)->ListRuns(kDefaultNamespace);
  ASSERT_OK(runs.status());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].steps, (std::vector<int64_t>{100}));
  EXPECT_TRUE((*runs)[0].origins.empty());
  EXPECT_TRUE((*store)->NamespaceSources("default")->empty());
}

}  // namespace
}  // namespace anisoscope::storage
