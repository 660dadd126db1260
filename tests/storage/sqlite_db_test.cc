#include "storage/sqlite_db.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/storage/store_test_util.h"

namespace anisoscope::storage {
namespace {

using testing::TempDir;

TEST(SqliteDbTest, Float64BlobsRoundTripExactlyIncludingSpecialValues) {
  const std::vector<double> values = {0.1,
                                      -1.0 / 3.0,
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::infinity(),
                                      -0.0};
  const std::string bytes = EncodeFloat64s(values);
  ASSERT_EQ(bytes.size(), values.size() * 8);
  // Little-endian: the lowest byte of 1.0 (0x3FF0000000000000) comes first.
  const std::string one = EncodeFloat64s({1.0});
  EXPECT_EQ(static_cast<unsigned char>(one[0]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>(one[7]), 0x3F);
  auto decoded = DecodeFloat64s(bytes);
  ASSERT_OK(decoded.status());
  ASSERT_EQ(decoded->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::memcmp(&(*decoded)[i], &values[i], 8), 0) << i;
  }
  const auto nan = DecodeFloat64s(EncodeFloat64s({std::nan("")}));
  ASSERT_OK(nan.status());
  EXPECT_TRUE(std::isnan((*nan)[0]));
}

TEST(SqliteDbTest, TruncatedBlobIsDataLoss) {
  EXPECT_EQ(DecodeFloat64s(std::string(7, 'x')).status().code(), absl::StatusCode::kDataLoss);
}

TEST(SqliteDbTest, OpenSetsWalSynchronousNormalAndForeignKeys) {
  TempDir dir;
  auto db = SqliteDb::Open({dir.File("a.db"), 1000});
  ASSERT_OK(db.status());
  auto statement = (*db)->Prepare("PRAGMA journal_mode");
  ASSERT_OK(statement.status());
  ASSERT_TRUE(*statement->Step());
  EXPECT_EQ(statement->ColumnText(0), "wal");
  EXPECT_EQ(*(*db)->QueryInt64("PRAGMA synchronous"), 1);  // NORMAL
  EXPECT_EQ(*(*db)->QueryInt64("PRAGMA foreign_keys"), 1);
  EXPECT_EQ(*(*db)->QueryInt64("PRAGMA busy_timeout"), 1000);
}

TEST(SqliteDbTest, ErrorsNameTheSqlAndTheDatabasePath) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  auto db = SqliteDb::Open({path});
  ASSERT_OK(db.status());
  const absl::Status bad_sql = (*db)->Prepare("SELEKT 1").status();
  EXPECT_EQ(bad_sql.code(), absl::StatusCode::kInternal);
  EXPECT_NE(bad_sql.message().find("SELEKT 1"), absl::string_view::npos) << bad_sql;
  EXPECT_NE(bad_sql.message().find(path), absl::string_view::npos) << bad_sql;

  ASSERT_OK((*db)->Exec("CREATE TABLE t (x INTEGER PRIMARY KEY)"));
  ASSERT_OK((*db)->Exec("INSERT INTO t VALUES (1)"));
  const absl::Status duplicate = (*db)->Exec("INSERT INTO t VALUES (1)");
  EXPECT_EQ(duplicate.code(), absl::StatusCode::kInvalidArgument) << duplicate;
  EXPECT_NE(duplicate.message().find("INSERT INTO t"), absl::string_view::npos) << duplicate;
}

TEST(SqliteDbTest, TransactionRollsBackUnlessCommitted) {
  TempDir dir;
  auto db = SqliteDb::Open({dir.File("a.db")});
  ASSERT_OK(db.status());
  ASSERT_OK((*db)->Exec("CREATE TABLE t (x INTEGER)"));
  {
    auto transaction = Transaction::Begin(db->get());
    ASSERT_OK(transaction.status());
    ASSERT_OK((*db)->Exec("INSERT INTO t VALUES (1)"));
  }
  EXPECT_EQ(*(*db)->QueryInt64("SELECT COUNT(*) FROM t"), 0);
  {
    auto transaction = Transaction::Begin(db->get());
    ASSERT_OK(transaction.status());
    ASSERT_OK((*db)->Exec("INSERT INTO t VALUES (1)"));
    ASSERT_OK(transaction->Commit());
  }
  EXPECT_EQ(*(*db)->QueryInt64("SELECT COUNT(*) FROM t"), 1);
}

TEST(SqliteDbTest, StatementsRebindAfterReset) {
  TempDir dir;
  auto db = SqliteDb::Open({dir.File("a.db")});
  ASSERT_OK(db.status());
  ASSERT_OK((*db)->Exec("CREATE TABLE t (a INTEGER, b REAL, c TEXT, d INTEGER)"));
  auto insert = (*db)->Prepare("INSERT INTO t VALUES (?, ?, ?, ?)");
  ASSERT_OK(insert.status());
  for (int i = 0; i < 3; ++i) {
    insert->Reset();
    ASSERT_OK(insert->BindAll(int64_t{i}, 0.5 * i, std::string("row"),
                              i == 1 ? std::optional<int>(7) : std::nullopt));
    ASSERT_OK(insert->Run());
  }
  EXPECT_EQ(*(*db)->QueryInt64("SELECT COUNT(*) FROM t"), 3);
  EXPECT_EQ(*(*db)->QueryInt64("SELECT COUNT(*) FROM t WHERE d IS NULL"), 2);
  EXPECT_EQ(*(*db)->QueryInt64("SELECT SUM(d) FROM t"), 7);
}

}  // namespace
}  // namespace anisoscope::storage
