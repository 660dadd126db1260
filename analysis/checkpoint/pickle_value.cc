#include "analysis/checkpoint/pickle_value.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr char kOrderedDict[] = "collections.OrderedDict";
constexpr char kRebuildTensor[] = "torch._utils._rebuild_tensor_v2";
constexpr char kRebuildParameter[] = "torch._utils._rebuild_parameter";

// A tuple of non-negative ints (a tensor's size or stride).
absl::StatusOr<std::vector<int64_t>> IntTuple(const ValuePtr& v, const char* what) {
  if (v->kind != Value::Kind::kTuple) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", what, " is not a tuple"));
  }
  std::vector<int64_t> out;
  for (const ValuePtr& item : v->items) {
    if (item->kind != Value::Kind::kInt || item->int_value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", what, " holds a non-integer or negative entry"));
    }
    out.push_back(item->int_value);
  }
  return out;
}

// _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, meta]).
absl::StatusOr<ValuePtr> RebuildTensor(const std::vector<ValuePtr>& args) {
  if (args.size() < 4 || args[0]->kind != Value::Kind::kStorage ||
      args[1]->kind != Value::Kind::kInt || args[1]->int_value < 0) {
    return absl::InvalidArgumentError(
        "calls _rebuild_tensor_v2 with arguments other than (storage, offset, size, stride, ...)");
  }
  const at::Tensor& storage = args[0]->tensor;
  const int64_t offset = args[1]->int_value;
  ASSIGN_OR_RETURN(std::vector<int64_t> size, IntTuple(args[2], "size"));
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, IntTuple(args[3], "stride"));
  if (size.size() != stride.size()) {
    return absl::InvalidArgumentError("tensor size and stride differ in length");
  }
  // The last element addressed must lie inside the storage.
  int64_t last = offset;
  bool empty = false;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == 0) empty = true;
    int64_t reach = 0;
    if (__builtin_mul_overflow(size[i] > 0 ? size[i] - 1 : 0, stride[i], &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      return absl::InvalidArgumentError("tensor view is too large");
    }
  }
  if (!empty && last >= storage.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor view (offset ", offset, ", last element ", last,
                     ") runs past its storage of ", storage.numel(), " elements"));
  }
  // A view with more elements than its storage repeats them (a zero stride): a copy of it
  // could dwarf the file, and torch.save writes none for a state dict.
  int64_t numel = 1;
  for (const int64_t dim : size) {
    if (__builtin_mul_overflow(numel, dim, &numel)) numel = INT64_MAX;
  }
  if (!empty && numel > storage.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor view of ", numel, " elements repeats its storage of ", storage.numel(),
                     " elements (overlapping views are refused)"));
  }
  ValuePtr v = MakeValue(Value::Kind::kTensor);
  v->tensor = empty ? at::empty(size, storage.options()) : storage.as_strided(size, stride, offset);
  return v;
}

}  // namespace

bool StorageDtype(const std::string& global, at::ScalarType* dtype) {
  static const std::pair<const char*, at::ScalarType> kStorages[] = {
      {"torch.FloatStorage", at::kFloat},       {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16}, {"torch.DoubleStorage", at::kDouble},
      {"torch.LongStorage", at::kLong},         {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},       {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},         {"torch.BoolStorage", at::kBool}};
  for (const auto& [name, type] : kStorages) {
    if (global == name) {
      *dtype = type;
      return true;
    }
  }
  return false;
}

bool AllowedGlobal(const std::string& name) {
  at::ScalarType unused;
  return name == kOrderedDict || name == kRebuildTensor || name == kRebuildParameter ||
         StorageDtype(name, &unused);
}

absl::StatusOr<ValuePtr> CallAllowedGlobal(const std::string& name,
                                           const std::vector<ValuePtr>& args) {
  if (name == kOrderedDict) {
    if (!args.empty()) return absl::InvalidArgumentError("builds an OrderedDict from arguments");
    return MakeValue(Value::Kind::kDict);
  }
  if (name == kRebuildTensor) return RebuildTensor(args);
  if (name == kRebuildParameter) {
    if (args.empty() || args[0]->kind != Value::Kind::kTensor) {
      return absl::InvalidArgumentError("calls _rebuild_parameter without a tensor");
    }
    return args[0];
  }
  return absl::InvalidArgumentError(
      absl::StrCat("calls '", name, "', which a state dict never calls"));
}

}  // namespace anisoscope::analysis
