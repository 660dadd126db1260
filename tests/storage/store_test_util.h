// Helpers for the storage tests: a temp directory per test, synthetic step results, raw
// SQL row counts, and status assertions (Abseil 20220623 has no status matchers).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

#include "storage/metrics_store.h"
#include "storage/types.h"
#include "tests/common/test_temp_dir.h"

#define ASSERT_OK(expr)                          \
  do {                                           \
    const auto& _s = (expr);                     \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (false)
#define EXPECT_OK(expr)                          \
  do {                                           \
    const auto& _s = (expr);                     \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (false)

namespace anisoscope::storage::testing {

// A fresh directory named after the running test; removed by the destructor.
using TempDir = ::anisoscope::TestTempDir;

// Deterministic, non-round doubles so that exact round trips mean something.
inline double SyntheticValue(int64_t step, int metric, int layer, int head) {
  return std::sin(0.1 * static_cast<double>(step) + 1.7 * metric + 0.37 * layer + 0.011 * head) /
         3.0;
}

inline constexpr const char* kHeadMetrics[] = {"qk_mean_cosine", "q_norm",       "k_norm",
                                               "attn_entropy",   "q_anisotropy", "k_anisotropy",
                                               "qk_bias_ratio"};
inline constexpr const char* kHiddenMetrics[] = {"hidden_anisotropy", "hidden_norm"};

// A step like a real one: 7 per-head metrics, 2 per-hidden-state metrics (layers + 1
// hidden states, head -1), and q_mean / k_mean vectors per head.
inline StepResult MakeStep(const std::string& run, const std::string& probe_id, int64_t step,
                           int layers = 2, int heads = 3, int head_dim = 4) {
  StepResult result;
  result.run = run;
  result.probe = {probe_id, "probe " + probe_id, 16, 2048};
  result.step = step;
  result.checkpoint_path = "/data/" + run + "/step" + std::to_string(step);
  result.checkpoint_bytes = 1000 + step;
  result.model_family = "bert";
  result.num_layers = layers;
  result.num_heads = heads;
  result.head_dim = head_dim;
  result.seconds = 1.25;
  for (int m = 0; m < 7; ++m) {
    for (int l = 0; l < layers; ++l) {
      for (int h = 0; h < heads; ++h) {
        result.scalars.push_back({kHeadMetrics[m], l, h, SyntheticValue(step, m, l, h)});
      }
    }
  }
  for (int m = 0; m < 2; ++m) {
    for (int l = 0; l <= layers; ++l) {
      result.scalars.push_back({kHiddenMetrics[m], l, -1, SyntheticValue(step, 10 + m, l, -1)});
    }
  }
  for (const char* kind : {"q_mean", "k_mean"}) {
    for (int l = 0; l < layers; ++l) {
      for (int h = 0; h < heads; ++h) {
        VectorValue vector{kind, l, h, {}};
        for (int d = 0; d < head_dim; ++d) {
          vector.values.push_back(SyntheticValue(step, kind[0], l, h * 100 + d));
        }
        result.vectors.push_back(std::move(vector));
      }
    }
  }
  return result;
}

// Runs `sql` (one integer result) on a separate raw connection to `path`.
inline int64_t RawCount(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  int64_t value = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

// Runs `sql` (no result) on a separate raw connection to `path`.
inline void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error != nullptr ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

// A store on a fresh database file in a per-test directory.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("metrics.db");
    auto store = MetricsStore::Open({path_});
    ASSERT_OK(store.status());
    store_ = std::move(store).value();
  }

  TempDir dir_;
  std::string path_;
  std::unique_ptr<MetricsStore> store_;
};

}  // namespace anisoscope::storage::testing
