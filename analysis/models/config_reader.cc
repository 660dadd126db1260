#include "analysis/models/config_reader.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::analysis {

std::string ConfigReader::Describe(const std::string& field) const {
  return absl::StrCat(file_.string(), ": field '", field, "'");
}

absl::StatusOr<int64_t> ConfigReader::PositiveInt(const std::string& field) const {
  if (!config_.is_object() || !config_.contains(field)) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(field), " is missing"));
  }
  const nlohmann::json& value = config_.at(field);
  if (!value.is_number_integer() || value.get<int64_t>() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(field), " must be a positive integer, got ", value.dump()));
  }
  return value.get<int64_t>();
}

absl::StatusOr<int64_t> ConfigReader::PositiveInt(const std::string& field,
                                                  int64_t default_value) const {
  if (!config_.is_object() || !config_.contains(field)) return default_value;
  return PositiveInt(field);
}

absl::StatusOr<double> ConfigReader::PositiveNumber(const std::string& field,
                                                    double default_value) const {
  if (!config_.is_object() || !config_.contains(field)) return default_value;
  const nlohmann::json& value = config_.at(field);
  if (!value.is_number() || value.get<double>() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(field), " must be a positive number, got ", value.dump()));
  }
  return value.get<double>();
}

absl::StatusOr<std::string> ConfigReader::String(const std::string& field,
                                                 const std::string& default_value) const {
  if (!config_.is_object() || !config_.contains(field)) return default_value;
  const nlohmann::json& value = config_.at(field);
  if (!value.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(field), " must be a string, got ", value.dump()));
  }
  return value.get<std::string>();
}

absl::StatusOr<bool> ConfigReader::Bool(const std::string& field, bool default_value) const {
  if (!config_.is_object() || !config_.contains(field)) return default_value;
  const nlohmann::json& value = config_.at(field);
  if (!value.is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(field), " must be true or false, got ", value.dump()));
  }
  return value.get<bool>();
}

bool ConfigReader::IsSet(const std::string& field) const {
  return config_.is_object() && config_.contains(field) && !config_.at(field).is_null();
}

}  // namespace anisoscope::analysis
