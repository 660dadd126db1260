#include "storage/schema.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "storage/backup.h"
#include "storage/metrics_store.h"
#include "storage/sqlite_db.h"
#include "tests/storage/store_test_util.h"

namespace anisoscope::storage {
namespace {

using testing::MakeStep;
using testing::RawCount;
using testing::TempDir;

TEST(SchemaTest, OpenMigratesAnEmptyFileToTheLatestVersion) {
  TempDir dir;
  const std::string path = dir.File("sub/dir/metrics.db");  // directories are created
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  EXPECT_GE(LatestSchemaVersion(), 2);
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), LatestSchemaVersion());
  for (const char* table :
       {"runs", "probes", "steps", "metrics", "series", "vectors", "jobs", "checkpoints"}) {
    EXPECT_EQ(RawCount(path, std::string("SELECT COUNT(*) FROM sqlite_schema WHERE name = '") +
                                 table + "'"),
              1)
        << table;
  }
}

TEST(SchemaTest, ReopeningKeepsDataAndVersion) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    auto store = MetricsStore::Open({path});
    ASSERT_OK(store.status());
    ASSERT_OK((*store)->WriteStep(MakeStep("r", "p", 100), false));
  }
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), LatestSchemaVersion());
  auto has = (*store)->HasStep("default", "r", "p", 100);
  ASSERT_OK(has.status());
  EXPECT_TRUE(*has);
  auto runs = (*store)->ListRuns("default");
  ASSERT_OK(runs.status());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].steps, std::vector<int64_t>{100});
}

TEST(SchemaTest, OldVersionIsMigratedForwardKeepingItsRows) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    auto db = SqliteDb::Open({path});
    ASSERT_OK(db.status());
    ASSERT_OK(MigrateSchema(db->get(), 1));
    ASSERT_OK((*db)->Exec("INSERT INTO metrics (name) VALUES ('old_metric')"));
  }
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), 1);
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), LatestSchemaVersion());
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM metrics WHERE name = 'old_metric'"), 1);
  EXPECT_OK((*store)->CreateJob({"r"}).status());
}

TEST(SchemaTest, NewerVersionIsRefusedWithAClearMessage) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  ASSERT_OK(MetricsStore::Open({path}).status());  // ours, as a newer anisoscope wrote it
  {
    auto db = SqliteDb::Open({path});
    ASSERT_OK(db.status());
    ASSERT_OK((*db)->Exec("PRAGMA user_version = 999"));
  }
  auto store = MetricsStore::Open({path});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_NE(store.status().message().find("999"), absl::string_view::npos) << store.status();
  EXPECT_NE(store.status().message().find("newer"), absl::string_view::npos) << store.status();
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), 999);
}

TEST(SchemaTest, FileThatIsNotADatabaseFailsToOpen) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    FILE* file = fopen(path.c_str(), "w");
    fputs("this is not an sqlite database, just some text long enough to matter......", file);
    fclose(file);
  }
  auto store = MetricsStore::Open({path});
  EXPECT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path), absl::string_view::npos) << store.status();
}

// Another program's SQLite file is never migrated into: refused at open, untouched.
TEST(SchemaTest, AnotherProgramsDatabaseIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.File("notes.db");
  {
    auto db = SqliteDb::Open({path});
    ASSERT_OK(db.status());
    ASSERT_OK((*db)->Exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT);"
                          "INSERT INTO notes (text) VALUES ('keep me')"));
  }
  auto store = MetricsStore::Open({path});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  for (const std::string& needle :
       {path, std::string("not an anisoscope database"), std::string("tables notes")}) {
    EXPECT_NE(store.status().message().find(needle), absl::string_view::npos) << store.status();
  }
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'runs'"), 0);
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM notes"), 1);

  // A file that says it belongs to another program, even with a user_version.
  const std::string other = dir.File("other.db");
  {
    auto db = SqliteDb::Open({other});
    ASSERT_OK(db.status());
    ASSERT_OK((*db)->Exec("PRAGMA application_id = 1234; PRAGMA user_version = 2"));
  }
  auto refused = MetricsStore::Open({other});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "belongs to another program (PRAGMA application_id 1234)"),
            absl::string_view::npos)
      << refused.status();
}

TEST(SchemaTest, OurFilesCarryOurApplicationId) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  ASSERT_OK(MetricsStore::Open({path}).status());
  EXPECT_EQ(RawCount(path, "PRAGMA application_id"), 0x616E6973);
  // Reopening (and a file from before the id, recognised by its tables) keeps working.
  ASSERT_OK(MetricsStore::Open({path}).status());
}

// A full disk (here a page cap) during a step's write: a clear error, nothing of that step
// stored, every earlier step intact and the file sound.
TEST(SchemaTest, AFullDiskFailsTheWriteAndLeavesNoPartialStep) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  MetricsStore::Options options{path};
  ASSERT_OK(MetricsStore::Open(options).status());
  options.max_pages = RawCount(path, "PRAGMA page_count") + 6;
  auto store = MetricsStore::Open(options);
  ASSERT_OK(store.status());
  int64_t stored = 0;
  absl::Status full;
  for (int64_t step = 0; step < 1000 && full.ok(); ++step) {
    full = (*store)->WriteStep(MakeStep("r", "p", step), false);
    if (full.ok()) ++stored;
  }
  ASSERT_FALSE(full.ok()) << "the page cap was never reached";
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find(path), absl::string_view::npos) << full;
  EXPECT_NE(full.message().find("full"), absl::string_view::npos) << full;
  EXPECT_GT(stored, 0);
  auto has = (*store)->HasStep(kDefaultNamespace, "r", "p", stored);
  ASSERT_OK(has.status());
  EXPECT_FALSE(*has);
  store->reset();
  options.max_pages = 0;
  options.check_integrity = true;
  auto reopened = MetricsStore::Open(options);
  ASSERT_OK(reopened.status());
  std::vector<int64_t> expected(stored);
  for (int64_t step = 0; step < stored; ++step) expected[step] = step;
  EXPECT_EQ((*reopened)->ListRuns(kDefaultNamespace)->at(0).steps, expected);
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM steps"), stored);
}

TEST(SchemaTest, VersionThreeRunsAndJobsMoveToTheDefaultNamespaceWithEveryStep) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    auto db = SqliteDb::Open({path});
    ASSERT_OK(db.status());
    ASSERT_OK(MigrateSchema(db->get(), 3));
    ASSERT_OK((*db)->Exec(R"sql(
INSERT INTO runs VALUES (7, 'bert', 'bert', 1, 1, 2, '2026-01-01T00:00:00Z');
INSERT INTO probes VALUES ('p', 'probe', 2, 8);
INSERT INTO steps VALUES (1, 7, 'p', 100, '/c/100', 10, 1.5, '2026-01-01T00:00:00Z');
INSERT INTO steps VALUES (2, 7, 'p', 200, '/c/200', 10, 1.5, '2026-01-01T00:00:00Z');
INSERT INTO metrics VALUES (1, 'qk_mean_cosine');
INSERT INTO series VALUES (1, 1, 0, 0, 0.25), (2, 1, 0, 0, 0.5);
INSERT INTO jobs (run, spec_json, state, created_at, updated_at)
  VALUES ('bert', '{"run":"bert","checkpoints":[]}', 'succeeded', 'x', 'x');
)sql"));
  }
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM pragma_foreign_key_check"), 0);
  auto runs = (*store)->ListRuns(kDefaultNamespace);
  ASSERT_OK(runs.status());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].name, "bert");
  EXPECT_EQ((*runs)[0].steps, (std::vector<int64_t>{100, 200}));
  auto series = (*store)->QuerySeries({"bert", "", "qk_mean_cosine"});
  ASSERT_OK(series.status());
  ASSERT_EQ(series->points.size(), 2u);
  EXPECT_EQ(series->points[1].value, 0.5);
  auto jobs = (*store)->ListJobs(0, kDefaultNamespace, "");
  ASSERT_OK(jobs.status());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].spec.ns, kDefaultNamespace);
  // Run names are unique per namespace now.
  StepResult other = MakeStep("bert", "p", 100);
  other.ns = "team-b";
  EXPECT_OK((*store)->WriteStep(other, false));
  EXPECT_EQ((*store)->ListRuns("team-b")->size(), 1u);
}

// Version 6: a probe shared by two namespaces becomes one row in each; every step, series
// point and job checkpoint stays; worker tokens made before scopes keep every namespace ('*'),
// the others keep theirs.
TEST(SchemaTest, VersionFiveProbesSplitPerNamespaceAndWorkerTokensKeepEveryNamespace) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    auto db = SqliteDb::Open({path});
    ASSERT_OK(db.status());
    ASSERT_OK(MigrateSchema(db->get(), 5));
    ASSERT_OK((*db)->Exec(R"sql(
INSERT INTO runs VALUES (1, 'nlp', 'r', 'bert', 1, 1, 2, '2026-01-01T00:00:00Z');
INSERT INTO runs VALUES (2, 'vision', 'r', 'bert', 1, 1, 2, '2026-01-01T00:00:00Z');
INSERT INTO probes VALUES ('p0123456789abcdef', 'shared', 2, 8);
INSERT INTO steps VALUES (1, 1, 'p0123456789abcdef', 100, '/c/100', 10, 1.5, 'x', '');
INSERT INTO steps VALUES (2, 2, 'p0123456789abcdef', 100, '/d/100', 10, 1.5, 'x', '');
INSERT INTO metrics VALUES (1, 'qk_mean_cosine');
INSERT INTO series VALUES (1, 1, 0, 0, 0.25), (2, 1, 0, 0, 0.5);
INSERT INTO jobs (run, spec_json, state, created_at, updated_at, namespace)
  VALUES ('r', '{"run":"r","checkpoints":[]}', 'running', 'x', 'x', 'nlp');
INSERT INTO checkpoints (job_id, step, path, state, lease_id) VALUES (1, 5, '/c/5', 'running', 'l');
INSERT INTO tokens (name, namespace, role, sha256, created_at)
  VALUES ('cluster', 'default', 'worker', 'aa', 'x'), ('alice', 'nlp', 'writer', 'bb', 'x');
)sql"));
  }
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM pragma_foreign_key_check"), 0);
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM probes"), 2);
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM series"), 2);
  for (const std::string ns : {"nlp", "vision"}) {
    auto runs = (*store)->ListRuns(ns);
    ASSERT_OK(runs.status());
    ASSERT_EQ(runs->size(), 1u) << ns;
    EXPECT_EQ((*runs)[0].steps, std::vector<int64_t>{100}) << ns;
    ASSERT_EQ((*runs)[0].probes.size(), 1u) << ns;
    EXPECT_EQ((*runs)[0].probes[0].description, "shared") << ns;
    EXPECT_TRUE(*(*store)->HasStep(ns, "r", "p0123456789abcdef", 100)) << ns;
  }
  auto job = (*store)->GetJob(1);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->checkpoints[0].lease_id, "l");
  EXPECT_EQ(job->checkpoints[0].lease_holder, "");  // adopted by the first identity to use it
  auto tokens = (*store)->ListTokens(false);
  ASSERT_OK(tokens.status());
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].ns, kAnyNamespace);
  EXPECT_EQ((*tokens)[1].ns, "nlp");
  // Another step of the run in one namespace leaves the other's probe row alone.
  StepResult later = MakeStep("r", "p0123456789abcdef", 200, 1, 1, 2);
  later.ns = "nlp";
  later.probe.description = "renamed in nlp";
  ASSERT_OK((*store)->WriteStep(later, false));
  EXPECT_EQ((*store)->ListRuns("vision")->at(0).probes[0].description, "shared");
  EXPECT_EQ((*store)->ListRuns("nlp")->at(0).probes[0].description, "renamed in nlp");
}

// '*' (every namespace) is a worker token's alone.
TEST(SchemaTest, OnlyAWorkerTokenMayServeEveryNamespace) {
  TempDir dir;
  auto store = MetricsStore::Open({dir.File("metrics.db")});
  ASSERT_OK(store.status());
  TokenRecord token{0, "cluster", kAnyNamespace, "worker", std::string(64, 'a')};
  ASSERT_OK((*store)->CreateToken(token).status());
  for (const char* role : {"reader", "writer", "admin"}) {
    token.name = role;
    token.role = role;
    token.sha256 = std::string(64, role[0]);
    EXPECT_EQ((*store)->CreateToken(token).status().code(), absl::StatusCode::kInvalidArgument)
        << role;
  }
  // Nor may a token pass for a caller without one (leases are bound to the caller's name).
  token.role = "worker";
  for (const char* name : {"embedded", "anonymous", "cert:node-7", "host:root"}) {
    token.name = name;
    token.sha256 = std::string(64, 'f');
    EXPECT_EQ((*store)->CreateToken(token).status().code(), absl::StatusCode::kInvalidArgument)
        << name;
  }
}

TEST(BackupTest, ACopyHoldsEveryStepAndPassesTheIntegrityCheck) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  for (int64_t step : {1, 2, 3}) ASSERT_OK((*store)->WriteStep(MakeStep("r", "p", step), false));
  const std::string copy = dir.File("backup.db");
  ASSERT_OK(BackupDatabase(path, copy));
  EXPECT_EQ(BackupDatabase(path, copy).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(BackupDatabase(dir.File("missing.db"), dir.File("b2.db")).code(),
            absl::StatusCode::kNotFound);
  MetricsStore::Options options{copy};
  options.check_integrity = true;
  auto restored = MetricsStore::Open(options);
  ASSERT_OK(restored.status());
  EXPECT_EQ((*restored)->ListRuns(kDefaultNamespace)->at(0).steps, (std::vector<int64_t>{1, 2, 3}));
}

TEST(BackupTest, ADamagedFileIsRefusedAtOpen) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    auto store = MetricsStore::Open({path});
    ASSERT_OK(store.status());
    for (int64_t step = 0; step < 40; ++step) {
      ASSERT_OK((*store)->WriteStep(MakeStep("r", "p", step), false));
    }
  }
  {
    // Every page after the first (the schema) overwritten: the tables' b-trees are gone.
    const auto size = static_cast<size_t>(std::filesystem::file_size(path));
    ASSERT_GT(size, 4096u * 4);
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(4096);
    file.write(std::string(size - 4096, '\x5a').data(), static_cast<std::streamsize>(size - 4096));
  }
  MetricsStore::Options options{path};
  options.check_integrity = true;
  auto store = MetricsStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_NE(store.status().message().find("restore it from a backup"), absl::string_view::npos)
      << store.status();
}

}  // namespace
}  // namespace anisoscope::storage
