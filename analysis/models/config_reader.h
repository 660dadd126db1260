// ConfigReader: typed access to config.json fields with errors naming file and field.
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

  // A positive integer field; INVALID_ARGUMENT when missing, mistyped or not positive.
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
