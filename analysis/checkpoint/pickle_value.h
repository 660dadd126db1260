// Values of the non-executing state-dict unpickler, and the few globals it may call.
//
// Internal to analysis/checkpoint. A Value is one object on the pickle stack; containers
// are shared (ValuePtr) so memo references alias them as in Python. The allow-list below
// is the whole set of callables a torch.save state dict needs; calling one only builds
// Values (an empty dict, a strided tensor view), it never runs user code. Thread-safe
// functions; Values are not synchronized.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::analysis {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor
  };
  explicit Value(Kind k) : kind(k) {}

  Kind kind;
  int64_t int_value = 0;                               // kInt, kBool
  double float_value = 0;                              // kFloat
  std::string text;                                    // kString, kBytes, kGlobal "module.name"
  std::vector<ValuePtr> items;                         // kTuple, kList
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // kDict, in insertion order
  at::Tensor tensor;                                   // kStorage (1-D), kTensor
};

inline ValuePtr MakeValue(Value::Kind kind) { return std::make_shared<Value>(kind); }

// True for "module.name" globals a state dict may reference.
bool AllowedGlobal(const std::string& name);

// The element type of a storage class such as "torch.FloatStorage"; false if not one.
bool StorageDtype(const std::string& global, at::ScalarType* dtype);

// Applies the allowed global `name` to `args` (pickle REDUCE): collections.OrderedDict()
// -> an empty dict; torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...) ->
// a bounds-checked strided view of the storage; torch._utils._rebuild_parameter(tensor,
// ...) -> the tensor. INVALID_ARGUMENT (message without a file prefix) otherwise.
absl::StatusOr<ValuePtr> CallAllowedGlobal(const std::string& name,
                                           const std::vector<ValuePtr>& args);

}  // namespace anisoscope::analysis
