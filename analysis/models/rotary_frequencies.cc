#include "analysis/models/rotary_frequencies.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr double kPi = 3.14159265358979323846;

// A number in the scaling object, with `field_name` (e.g. "rope_scaling") in errors.
absl::StatusOr<double> ScalingNumber(const ConfigReader& reader, const std::string& field_name,
                                     const nlohmann::json& scaling, const std::string& key) {
  if (!scaling.contains(key) || !scaling[key].is_number() || scaling[key].get<double>() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe(field_name), " needs a positive number '", key, "'"));
  }
  return scaling[key].get<double>();
}

}  // namespace

std::vector<double> RotaryScaling::InverseFrequencies(int64_t rotary_dims) const {
  std::vector<double> inv_freq;
  for (int64_t i = 0; i < rotary_dims; i += 2) {
    inv_freq.push_back(1.0 / std::pow(theta, static_cast<double>(i) / rotary_dims));
  }
  if (type == Type::kLinear) {
    for (double& frequency : inv_freq) frequency /= factor;
  } else if (type == Type::kLlama3) {
    // Llama 3.1: frequencies whose wavelength exceeds original / low_freq_factor are divided
    // by factor, those under original / high_freq_factor kept, those between interpolated.
    const double low = low_freq_factor, high = high_freq_factor;
    for (double& frequency : inv_freq) {
      const double wavelength = 2 * kPi / frequency;
      if (wavelength > original_max_positions / low) {
        frequency /= factor;
      } else if (wavelength >= original_max_positions / high) {
        const double smooth = (original_max_positions / wavelength - low) / (high - low);
        frequency = (1 - smooth) * frequency / factor + smooth * frequency;
      }
    }
  }
  return inv_freq;
}

absl::StatusOr<RotaryScaling> ReadRotaryScaling(const ConfigReader& reader,
                                                const nlohmann::json& config) {
  // transformers 5 keeps theta and the scaling in rope_parameters; earlier ones rope_theta
  // and rope_scaling.
  const bool parameters =
      config.contains("rope_parameters") && config["rope_parameters"].is_object();
  const std::string field_name = parameters ? "rope_parameters" : "rope_scaling";
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& scaling = reader.IsSet(field_name) ? config.at(field_name) : none;
  if (!scaling.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe(field_name), " must be an object or null"));
  }
  RotaryScaling rotary;
  if (parameters && scaling.contains("rope_theta")) {
    ASSIGN_OR_RETURN(rotary.theta, ScalingNumber(reader, field_name, scaling, "rope_theta"));
  } else {
    ASSIGN_OR_RETURN(rotary.theta, reader.PositiveNumber("rope_theta", 10000));
  }
  const char* type_key = scaling.contains("rope_type") ? "rope_type" : "type";
  const std::string type = scaling.contains(type_key) && scaling[type_key].is_string()
                               ? scaling[type_key].get<std::string>()
                               : "default";
  if (type == "default" || type == "dynamic") return rotary;
  if (type == "linear") {
    rotary.type = RotaryScaling::Type::kLinear;
    ASSIGN_OR_RETURN(rotary.factor, ScalingNumber(reader, field_name, scaling, "factor"));
    return rotary;
  }
  if (type == "llama3") {
    rotary.type = RotaryScaling::Type::kLlama3;
    ASSIGN_OR_RETURN(rotary.factor, ScalingNumber(reader, field_name, scaling, "factor"));
    ASSIGN_OR_RETURN(rotary.low_freq_factor,
                     ScalingNumber(reader, field_name, scaling, "low_freq_factor"));
    ASSIGN_OR_RETURN(rotary.high_freq_factor,
                     ScalingNumber(reader, field_name, scaling, "high_freq_factor"));
    ASSIGN_OR_RETURN(
        rotary.original_max_positions,
        ScalingNumber(reader, field_name, scaling, "original_max_position_embeddings"));
    if (rotary.high_freq_factor <= rotary.low_freq_factor) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader.Describe(field_name), " has high_freq_factor <= low_freq_factor"));
    }
    return rotary;
  }
  constexpr size_t kMaxQuoted = 32;  // a type name is quoted only when short
  return absl::InvalidArgumentError(
      absl::StrCat(reader.Describe(field_name), " has rope type '",
                   type.size() <= kMaxQuoted ? type : type.substr(0, kMaxQuoted) + "...",
                   "', which is not supported (supported: default, linear, dynamic, llama3)"));
}

}  // namespace anisoscope::analysis
