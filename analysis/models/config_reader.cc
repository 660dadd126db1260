#include "analysis/models/config_reader.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::analysis {

std::string ConfigReader::Describe(const std::string& field) const {
  return absl::StrCat(file_.string(), ": field '", field, "'");
}

namespace {

// What a field holds, as an error may say it: a number is quoted, any other value only
// named by its type (its text is the file's, and may be long).
std::string Shown(const nlohmann::json& value) {
  return value.is_number() || value.is_boolean() || value.is_null()
             ? value.dump()
             : absl::StrCat("a JSON ", value.type_name());
}

}  // namespace

absl::StatusOr<int64_t> ConfigReader::PositiveInt(const std::string& field) const {
  if (!config_.is_object() || !config_.contains(field)) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(field), " is missing"));
  }
  const nlohmann::json& value = config_.at(field);
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > kMaxInt) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(field),
                                                   " must be a positive integer of at most ",
                                                   kMaxInt, ", got ", Shown(value)));
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
        absl::StrCat(Describe(field), " must be a positive number, got ", Shown(value)));
  }
  return value.get<double>();
}

absl::StatusOr<std::string> ConfigReader::String(const std::string& field,
                                                 const std::string& default_value) const {
  if (!config_.is_object() || !config_.contains(field)) return default_value;
  const nlohmann::json& value = config_.at(field);
  if (!value.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(field), " must be a string, got ", Shown(value)));
  }
  return value.get<std::string>();
}

absl::StatusOr<bool> ConfigReader::Bool(const std::string& field, bool default_value) const {
  if (!config_.is_object() || !config_.contains(field)) return default_value;
  const nlohmann::json& value = config_.at(field);
  if (!value.is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(field), " must be true or false, got ", Shown(value)));
  }
  return value.get<bool>();
}

bool ConfigReader::IsSet(const std::string& field) const {
  return config_.is_object() && config_.contains(field) && !config_.at(field).is_null();
}

}  // namespace anisoscope::analysis
