#include "analysis/checkpoint/safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace anisoscope::analysis {
namespace {

using Json = nlohmann::json;

// A tensor name as errors quote it: at most 128 bytes, then its length.
std::string ShortName(const std::string& name) {
  constexpr size_t kMaxName = 128;
  if (name.size() <= kMaxName) return name;
  return absl::StrCat(name.substr(0, kMaxName), "... (", name.size(), " bytes)");
}

// Reads the header's events into entries. Depth 1 holds the tensors (and __metadata__),
// depth 2 a tensor's fields, depth 3 the elements of its shape or data_offsets. A value
// being skipped (metadata, unknown fields) is followed only by its depth.
class HeaderReader : public nlohmann::json_sax<Json> {
 public:
  explicit HeaderReader(const std::string& label) : label_(label) {}

  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t value) override {
    if (value >= 0) return number_unsigned(static_cast<uint64_t>(value));
    return Scalar();
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (skip_depth_ == 0 && depth_ == 3) {
      Array().push_back(value);
      return true;
    }
    return Scalar();
  }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }
  bool string(string_t& value) override {
    if (skip_depth_ == 0 && depth_ == 2 && field_ == Field::kDtype) {
      entries_.back().dtype = std::move(value);
      has_dtype_ = true;
      return true;
    }
    return Scalar();
  }
  bool start_object(std::size_t) override { return Open(/*object=*/true); }
  bool start_array(std::size_t) override { return Open(/*object=*/false); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& value) override {
    if (skip_depth_ != 0) return true;
    if (depth_ == 1) {
      name_ = std::move(value);
    } else if (depth_ == 2) {
      field_ = value == "dtype"          ? Field::kDtype
               : value == "shape"        ? Field::kShape
               : value == "data_offsets" ? Field::kOffsets
                                         : Field::kOther;
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    // The token read is bytes of the file: only its position is told.
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(
          absl::StrCat(label_, ": header is not valid JSON: malformed JSON at byte ", position));
    }
    return false;
  }

  absl::Status error() const { return error_; }
  std::vector<SafetensorsEntry> TakeEntries() { return std::move(entries_); }

 private:
  enum class Field { kDtype, kShape, kOffsets, kOther };

  std::vector<uint64_t>& Array() {
    return field_ == Field::kShape ? entries_.back().shape : entries_.back().data_offsets;
  }
  std::string Where() const { return DescribeSafetensorsTensor(label_, name_); }
  bool Fail(std::string message) {
    error_ = absl::InvalidArgumentError(std::move(message));
    return false;
  }
  bool Metadata() const { return depth_ == 1 && name_ == "__metadata__"; }

  // A string, number, bool or null where no such value is read.
  bool Scalar() {
    if (skip_depth_ != 0) return true;
    if (depth_ == 0) return Fail(absl::StrCat(label_, ": header is not a JSON object"));
    if (depth_ == 1) {
      return Metadata() || Fail(absl::StrCat(Where(), " is not a JSON object"));
    }
    if (depth_ == 2) {
      if (field_ == Field::kDtype) return Fail(absl::StrCat(Where(), " has no 'dtype' string"));
      if (field_ == Field::kOther) return true;
      return Fail(absl::StrCat(Where(), " has no '", FieldName(), "' array"));
    }
    return Fail(absl::StrCat(Where(), " field '", FieldName(),
                             "' holds a value that is not a non-negative integer"));
  }

  bool Open(bool object) {
    ++depth_;
    if (skip_depth_ != 0) return true;
    if (depth_ == 1) {
      return object || Fail(absl::StrCat(label_, ": header is not a JSON object"));
    }
    if (depth_ == 2) {
      if (name_ == "__metadata__") {
        skip_depth_ = depth_;
        return true;
      }
      if (!object) return Fail(absl::StrCat(Where(), " is not a JSON object"));
      if (entries_.size() == kMaxSafetensorsTensors) {
        return Fail(absl::StrCat(label_, ": header lists more than ", kMaxSafetensorsTensors,
                                 " tensors, the most one file may hold"));
      }
      entries_.push_back(SafetensorsEntry{name_, "", {}, {}});
      has_dtype_ = has_shape_ = has_offsets_ = false;
      field_ = Field::kOther;
      return true;
    }
    if (depth_ == 3) {
      if (field_ == Field::kOther) {
        skip_depth_ = depth_;
        return true;
      }
      if (field_ == Field::kDtype || object) {
        --depth_;
        return Scalar();
      }
      Array().clear();
      (field_ == Field::kShape ? has_shape_ : has_offsets_) = true;
      return true;
    }
    return Fail(absl::StrCat(Where(), " field '", FieldName(),
                             "' holds a value that is not a non-negative integer"));
  }

  bool Close() {
    if (skip_depth_ != 0) {
      if (depth_ == skip_depth_) skip_depth_ = 0;
      --depth_;
      return true;
    }
    if (depth_ == 2) {  // the end of a tensor's object
      if (!has_dtype_) return Fail(absl::StrCat(Where(), " has no 'dtype' string"));
      if (!has_shape_) return Fail(absl::StrCat(Where(), " has no 'shape' array"));
      if (!has_offsets_) return Fail(absl::StrCat(Where(), " has no 'data_offsets' array"));
    }
    --depth_;
    return true;
  }

  const char* FieldName() const { return field_ == Field::kShape ? "shape" : "data_offsets"; }

  const std::string& label_;
  absl::Status error_;
  std::vector<SafetensorsEntry> entries_;
  std::string name_;  // the tensor whose value is being read
  Field field_ = Field::kOther;
  int depth_ = 0;
  int skip_depth_ = 0;  // the depth of the value being skipped; 0 when none
  bool has_dtype_ = false, has_shape_ = false, has_offsets_ = false;
};

}  // namespace

std::string DescribeSafetensorsTensor(const std::string& label, const std::string& name) {
  return absl::StrCat(label, ": tensor '", ShortName(name), "'");
}

absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(std::string_view header,
                                                                     const std::string& label) {
  HeaderReader reader(label);
  if (!Json::sax_parse(header.begin(), header.end(), &reader)) {
    absl::Status error = reader.error();
    if (error.ok()) error = absl::InvalidArgumentError(absl::StrCat(label, ": header is invalid"));
    return error;
  }
  std::vector<SafetensorsEntry> entries = reader.TakeEntries();
  // A name given twice is refused (a JSON reader would keep one silently): found sorted.
  std::vector<size_t> by_name(entries.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::sort(by_name.begin(), by_name.end(),
            [&](size_t a, size_t b) { return entries[a].name < entries[b].name; });
  for (size_t i = 1; i < by_name.size(); ++i) {
    if (entries[by_name[i]].name == entries[by_name[i - 1]].name) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeSafetensorsTensor(label, entries[by_name[i]].name), " is named twice"));
    }
  }
  return entries;
}

absl::Status CheckSafetensorsLayout(const std::vector<SafetensorsEntry>& entries,
                                    uint64_t data_size, const std::string& label) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return entries[a].data_offsets < entries[b].data_offsets; });
  uint64_t next = 0;  // where the next tensor must begin
  const SafetensorsEntry* previous = nullptr;
  for (const size_t i : order) {
    const SafetensorsEntry& entry = entries[i];
    const uint64_t begin = entry.data_offsets[0], end = entry.data_offsets[1];
    const std::string offsets = absl::StrCat("data_offsets [", begin, ", ", end, "]");
    if (begin < next) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeSafetensorsTensor(label, entry.name), " ", offsets, " overlaps tensor '",
          ShortName(previous->name), "' (the format forbids overlapping tensors)"));
    }
    if (begin > next) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeSafetensorsTensor(label, entry.name), " ", offsets, " leaves bytes [", next, ", ",
          begin, ") of the data unused (the format wants tensors contiguous from 0)"));
    }
    next = end;
    previous = &entry;
  }
  if (next != data_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": the tensors end at byte ", next, " of a data section of ", data_size,
                     " bytes (the format wants them to fill it exactly)"));
  }
  return absl::OkStatus();
}

}  // namespace anisoscope::analysis
