#include "storage/schema.h"

#include <gtest/gtest.h>

#include "storage/metrics_store.h"
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
  auto has = (*store)->HasStep("r", "p", 100);
  ASSERT_OK(has.status());
  EXPECT_TRUE(*has);
  auto runs = (*store)->ListRuns();
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

}  // namespace
}  // namespace anisoscope::storage
