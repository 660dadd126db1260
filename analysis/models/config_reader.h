// ConfigReader: typed access to config.json fields with errors naming file and field, and
// quoting no text of the file (numbers only).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace anisoscope::analysis {

class ConfigReader {
 public:
  // `config` and `file` must outlive the reader.
  ConfigReader(const nlohmann::json& config, const std::filesystem::path& file)
      : config_(config), file_(file) {}

  // The largest integer a field may hold: a sane range for every size a model has (2^24:
  // vocabularies, hidden sizes, heads, layers, positions), so that no product of two
  // overflows and nothing is sized from a number the weights have not confirmed.
  static constexpr int64_t kMaxInt = int64_t{1} << 24;

  // A positive integer field of at most kMaxInt; INVALID_ARGUMENT when missing, mistyped,
  // not positive or larger.
  absl::StatusOr<int64_t> PositiveInt(const std::string& field) const;
  // The same with a default for a missing field.
  absl::StatusOr<int64_t> PositiveInt(const std::string& field, int64_t default_value) const;
  absl::StatusOr<double> PositiveNumber(const std::string& field, double default_value) const;
  absl::StatusOr<std::string> String(const std::string& field,
                                     const std::string& default_value) const;
  absl::StatusOr<bool> Bool(const std::string& field, bool default_value) const;
  // True when `field` is present and not null (HF writes unset optional fields as null).
  bool IsSet(const std::string& field) const;

  // "config.json field 'hidden_size' ..." prefix for custom errors.
  std::string Describe(const std::string& field) const;

 private:
  const nlohmann::json& config_;
  const std::filesystem::path& file_;
};

}  // namespace anisoscope::analysis
