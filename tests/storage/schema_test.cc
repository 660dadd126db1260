#include "storage/schema.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/version.h"
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
  // The number every binary's --version prints (common/version.h) is this build's schema.
  EXPECT_EQ(LatestSchemaVersion(), kDatabaseSchemaVersion);
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
  EXPECT_OK((*store)->CreateJob({"r"}, "").status());
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

// Version 9: the duplicate alarms that --force re-runs stored before fold into one per event
// (run, probe, rule, layer, step fired): the most recently changed row survives with the
// resolution recorded last among its copies and a new revision; other events stay as they are.
TEST(SchemaTest, VersionEightDuplicateAlarmsFoldIntoOnePerEvent) {
  TempDir dir;
  const std::string path = dir.File("metrics.db");
  {
    auto db = SqliteDb::Open({path});
    ASSERT_OK(db.status());
    ASSERT_OK(MigrateSchema(db->get(), 8));
    // Layer 0: fired at 400 and resolved at 800 by the first run and again by a --force
    // re-run (the chart read "layers 0, 0 · resolved at 800, 800"). Layer 1: resolved at 800,
    // then a re-run that stopped while its copy was firing. Layer 2: three copies, the last
    // resolution recorded at 600. Layer 3: one alarm.
    ASSERT_OK((*db)->Exec(R"sql(
INSERT INTO runs VALUES (1, 'default', 'r', 'gpt_neox', 4, 1, 2, 'x');
INSERT INTO alarms (id, run_id, probe_id, rule, metric, layer, step, value, reference, severity,
                    summary, fired_at, resolved_step, resolved_at, revision) VALUES
  (1, 1, 'p', 'c', 'm', 0, 400, 0.4, 0.5, 'critical', 'first', 'f1', 800, 'r1', 1),
  (2, 1, 'p', 'c', 'm', 1, 400, 0.4, 0.5, 'critical', 'first', 'f1', 800, 'r1', 3),
  (3, 1, 'p', 'c', 'm', 2, 400, 0.4, 0.5, 'critical', 'first', 'f1', 800, 'r1', 4),
  (4, 1, 'p', 'c', 'm', 3, 400, 0.4, 0.5, 'critical', 'single', 'f1', NULL, '', 5),
  (5, 1, 'p', 'c', 'm', 0, 400, 0.3, 0.5, 'critical', 'again', 'f2', 800, 'r2', 7),
  (6, 1, 'p', 'c', 'm', 1, 400, 0.3, 0.5, 'critical', 'again', 'f2', NULL, '', 8),
  (7, 1, 'p', 'c', 'm', 2, 400, 0.3, 0.5, 'critical', 'again', 'f2', 600, 'r2', 9),
  (8, 1, 'p', 'c', 'm', 2, 400, 0.2, 0.5, 'critical', 'third', 'f3', NULL, '', 10);
)sql"));
  }
  auto store = MetricsStore::Open({path});
  ASSERT_OK(store.status());
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), LatestSchemaVersion());
  auto list = (*store)->ListAlarms({kDefaultNamespace, "r"});
  ASSERT_OK(list.status());
  ASSERT_EQ(list->alarms.size(), 4u);
  // By revision: the untouched single alarm first, then the survivors with new revisions.
  const std::vector<AlarmRecord>& alarms = list->alarms;
  EXPECT_EQ(alarms[0].id, 4);
  EXPECT_EQ(alarms[0].revision, 5);
  EXPECT_FALSE(alarms[0].resolved_step.has_value());
  const auto survivor = [&](int layer) {
    for (const AlarmRecord& alarm : alarms) {
      if (alarm.layer == layer) return alarm;
    }
    return AlarmRecord{};
  };
  EXPECT_EQ(survivor(0).id, 5);
  EXPECT_EQ(survivor(0).summary, "again");
  EXPECT_EQ(survivor(0).resolved_step, 800);
  EXPECT_EQ(survivor(0).resolved_at, "r2");
  EXPECT_EQ(survivor(1).id, 6);  // the re-run's copy, with the first run's resolution
  EXPECT_EQ(survivor(1).resolved_step, 800);
  EXPECT_EQ(survivor(1).resolved_at, "r1");
  EXPECT_EQ(survivor(2).id, 8);  // the latest copy, with the resolution recorded last
  EXPECT_EQ(survivor(2).summary, "third");
  EXPECT_EQ(survivor(2).resolved_step, 600);
  for (int layer = 0; layer < 3; ++layer) EXPECT_GT(survivor(layer).revision, 10) << layer;
  EXPECT_EQ(RawCount(path, "SELECT COUNT(DISTINCT revision) FROM alarms"), 4);

  // The event is unique now: firing it again updates the survivor in place.
  AlarmRecord again = survivor(0);
  again.id = 0;
  again.value = 0.25;
  auto changed = (*store)->RecordAlarms({again}, {});
  ASSERT_OK(changed.status());
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ((*changed)[0].id, 5);
  EXPECT_EQ((*changed)[0].value, 0.25);
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM alarms"), 4);
  auto db = SqliteDb::Open({path});
  ASSERT_OK(db.status());
  const absl::Status duplicate =
      (*db)->Exec("INSERT INTO alarms (run_id, probe_id, rule, metric, layer, step, severity, "
                  "summary, fired_at, revision) VALUES (1, 'p', 'c', 'm', 3, 400, 'critical', "
                  "'s', 'f', 99)");
  EXPECT_FALSE(duplicate.ok());
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

TEST(BackupTest, AFileThatWasNeverSqliteIsNamedSoNotDamaged) {
  TempDir dir;
  const std::string path = dir.File("notes.txt");
  std::ofstream(path) << "experiment notes, not a database\n";
  auto store = MetricsStore::Open({path});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.status().message(),
            "database " + path +
                " is not a SQLite database (it does not start with SQLite's header): check --db, "
                "which names the server's database file (a new path starts an empty one)");
  std::ifstream file(path);
  std::string content;
  std::getline(file, content);
  EXPECT_EQ(content, "experiment notes, not a database");  // left as it was
}

TEST(BackupTest, AnEmptyFileIsANewDatabase) {
  TempDir dir;
  const std::string path = dir.File("empty.db");
  std::ofstream(path).flush();
  EXPECT_OK(MetricsStore::Open({path}).status());
}

}  // namespace
}  // namespace anisoscope::storage
