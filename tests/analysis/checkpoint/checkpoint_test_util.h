// Helpers shared by the checkpoint tests: fixture paths and expected-value comparison.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "analysis/checkpoint/checkpoint.h"

namespace anisoscope::analysis {

// $ANISOSCOPE_FIXTURES/checkpoint_formats/<name>, written by make_checkpoint_formats.py.
inline std::filesystem::path FixturePath(const std::string& name) {
  const char* root = std::getenv("ANISOSCOPE_FIXTURES");
  return std::filesystem::path(root == nullptr ? "fixtures" : root) / "checkpoint_formats" / name;
}

inline nlohmann::json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// True when `status` has `code` and its message contains every one of `parts`.
template <typename... Parts>
::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                    const Parts&... parts) {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "code " << absl::StatusCodeToString(status.code()) << ", want "
           << absl::StatusCodeToString(code) << ": " << status.message();
  }
  for (const std::string& part : {std::string(parts)...}) {
    if (status.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message '" << status.message() << "' lacks '" << part << "'";
    }
  }
  return ::testing::AssertionSuccess();
}

inline const char* DtypeName(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "F32";
    case at::kHalf:
      return "F16";
    case at::kBFloat16:
      return "BF16";
    case at::kLong:
      return "I64";
    case at::kDouble:
      return "F64";
    default:
      return "?";
  }
}

// Compares `checkpoint`'s tensors with the dir's expected.json: names, dtype, shape, values.
inline void ExpectMatchesExpectedJson(const Checkpoint& checkpoint) {
  const nlohmann::json expected = ReadJson(checkpoint.dir() / "expected.json");
  EXPECT_EQ(checkpoint.tensors().size(), expected.size());
  for (const auto& [name, want] : expected.items()) {
    const StoredTensor* stored = checkpoint.Find(name);
    ASSERT_NE(stored, nullptr) << name;
    const at::Tensor& t = stored->tensor;
    EXPECT_EQ(DtypeName(t.scalar_type()), want["dtype"].get<std::string>()) << name;
    EXPECT_EQ(t.sizes().vec(), want["shape"].get<std::vector<int64_t>>()) << name;
    const at::Tensor flat = t.to(at::kDouble).contiguous().flatten();
    const auto values = want["values"].get<std::vector<double>>();
    ASSERT_EQ(flat.numel(), static_cast<int64_t>(values.size())) << name;
    const double* got = flat.data_ptr<double>();
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(got[i], values[i]) << name << "[" << i << "]";
    }
  }
}

}  // namespace anisoscope::analysis
