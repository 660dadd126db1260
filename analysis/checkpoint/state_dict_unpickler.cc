#include "analysis/checkpoint/state_dict_unpickler.h"

#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/checkpoint/pickle_value.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

// What the objects a pickle builds may cost, in bytes of heap per byte of the pickle and
// a constant on top: a torch.save state dict costs about 30 bytes per byte of its pickle
// (every object memoized), so the constant admits some 4,000 tensors in one file, while an
// opcode that makes an object from one byte (EMPTY_LIST, DUP) is stopped at twice the
// pickle's size plus the constant instead of 175 times its size.
constexpr uint64_t kBudgetPerByte = 2;
constexpr uint64_t kBudgetBase = uint64_t{16} << 20;
// The heap each thing costs, as charged against the budget (allocator overhead included).
constexpr uint64_t kValueBytes = sizeof(Value) + 32;  // make_shared's block
constexpr uint64_t kSlotBytes = 16;                   // a ValuePtr in a vector
constexpr uint64_t kMemoBytes = 64;                   // an unordered_map node and bucket
constexpr uint64_t kTensorBytes = 512;                // a TensorImpl and its sizes

class Unpickler {
 public:
  Unpickler(std::string_view pickle, const std::string& label, const StorageLoader& loader)
      : in_(pickle),
        budget_(kBudgetBase + kBudgetPerByte * pickle.size()),
        label_(label),
        loader_(loader) {}
  // Unlinks every container first, so that deep or cyclic pickles free without recursion.
  ~Unpickler() {
    for (const ValuePtr& v : containers_) {
      v->items.clear();
      v->entries.clear();
    }
  }
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  absl::StatusOr<ValuePtr> Run();

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(label_, ": pickle ", what, " (at byte ", op_pos_, ")"));
  }
  absl::Status Read(size_t n, const char** out) {
    if (in_.size() - pos_ < n) return Error("is truncated");
    *out = in_.data() + pos_;
    pos_ += n;
    return absl::OkStatus();
  }
  // Reads an n-byte little-endian unsigned integer.
  absl::StatusOr<uint64_t> ReadUint(size_t n) {
    const char* p = nullptr;
    RETURN_IF_ERROR(Read(n, &p));
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(p[i]);
    return v;
  }
  absl::StatusOr<std::string> ReadLine() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) return Error("is truncated inside a GLOBAL");
    std::string line(in_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return line;
  }
  // Pushes `v`, charging its slot and, when it is new (no other reference), the value.
  void Push(ValuePtr v) {
    charged_ += kSlotBytes;
    const Value::Kind kind = v->kind;
    if (v.use_count() == 1) {
      charged_ += kValueBytes + v->text.size() + v->items.size() * kSlotBytes +
                  v->entries.size() * 2 * kSlotBytes + (v->tensor.defined() ? kTensorBytes : 0);
      if (kind == Value::Kind::kTuple || kind == Value::Kind::kList || kind == Value::Kind::kDict) {
        charged_ += kSlotBytes;
        containers_.push_back(v);
      }
    }
    stack_.push_back(std::move(v));
  }
  // OK while what the pickle built so far fits the budget (the bound of the header).
  absl::Status CheckBudget() const {
    if (charged_ <= budget_) return absl::OkStatus();
    return Error(absl::StrCat("builds more objects than ", kBudgetPerByte,
                              " bytes per byte of its ", in_.size(), " bytes plus ",
                              kBudgetBase >> 20, " MiB allow: not a state dict"));
  }
  absl::StatusOr<ValuePtr> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Error("pops from an empty stack");
    }
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  // Removes and returns everything above the topmost MARK.
  absl::StatusOr<std::vector<ValuePtr>> PopToMark() {
    if (marks_.empty()) return Error("has no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(std::make_move_iterator(stack_.begin() + mark),
                                std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }
  absl::StatusOr<ValuePtr> Top(Value::Kind kind, const char* opcode) {
    if (stack_.empty() || stack_.back()->kind != kind) {
      return Error(absl::StrCat(opcode, " applies to the wrong kind of object"));
    }
    return stack_.back();
  }
  absl::Status PushGlobal(const std::string& module, const std::string& name);
  absl::Status Reduce();
  absl::Status PersistentLoad();

  std::string_view in_;
  const uint64_t budget_;  // bytes of objects the pickle may build
  uint64_t charged_ = 0;   // bytes of objects built so far (never credited back)
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  const std::string& label_;
  const StorageLoader& loader_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::vector<ValuePtr> containers_;          // every tuple, list and dict made, for teardown
  std::map<std::string, ValuePtr> storages_;  // by storage key
};

absl::Status Unpickler::PushGlobal(const std::string& module, const std::string& name) {
  const std::string full = absl::StrCat(module, ".", name);
  if (!AllowedGlobal(full)) {
    return absl::InvalidArgumentError(
        absl::StrCat(label_, ": pickle global '", full, "' is not allowed in a state dict"));
  }
  ValuePtr v = MakeValue(Value::Kind::kGlobal);
  v->text = full;
  Push(std::move(v));
  return absl::OkStatus();
}

absl::Status Unpickler::Reduce() {
  ASSIGN_OR_RETURN(ValuePtr args, Pop());
  ASSIGN_OR_RETURN(ValuePtr callable, Pop());
  if (callable->kind != Value::Kind::kGlobal || args->kind != Value::Kind::kTuple) {
    return Error("REDUCE needs a global and an argument tuple");
  }
  absl::StatusOr<ValuePtr> result = CallAllowedGlobal(callable->text, args->items);
  if (!result.ok()) return Error(std::string(result.status().message()));
  Push(*std::move(result));
  return absl::OkStatus();
}

absl::Status Unpickler::PersistentLoad() {
  ASSIGN_OR_RETURN(ValuePtr pid, Pop());
  const auto& f = pid->items;
  at::ScalarType dtype;
  if (pid->kind != Value::Kind::kTuple || f.size() != 5 || f[0]->kind != Value::Kind::kString ||
      f[0]->text != "storage" || f[1]->kind != Value::Kind::kGlobal ||
      !StorageDtype(f[1]->text, &dtype) || f[2]->kind != Value::Kind::kString ||
      f[4]->kind != Value::Kind::kInt || f[4]->int_value < 0) {
    return Error("persistent id is not ('storage', <storage type>, key, location, numel)");
  }
  const std::string& key = f[2]->text;
  auto it = storages_.find(key);
  if (it == storages_.end()) {
    ASSIGN_OR_RETURN(at::Tensor storage, loader_(key, dtype, f[4]->int_value));
    ValuePtr v = MakeValue(Value::Kind::kStorage);
    v->tensor = std::move(storage);
    charged_ += kValueBytes + kTensorBytes + key.size();
    it = storages_.emplace(key, std::move(v)).first;
  } else if (it->second->tensor.scalar_type() != dtype) {
    return Error(absl::StrCat("storage '", key, "' is used with two dtypes"));
  }
  Push(it->second);
  return absl::OkStatus();
}

absl::StatusOr<ValuePtr> Unpickler::Run() {
  using K = Value::Kind;
  while (true) {
    RETURN_IF_ERROR(CheckBudget());
    op_pos_ = pos_;
    const char* p = nullptr;
    RETURN_IF_ERROR(Read(1, &p));
    const uint8_t op = static_cast<uint8_t>(*p);
    switch (op) {
      case 0x80:
        RETURN_IF_ERROR(Read(1, &p));
        break;  // PROTO
      case 0x95:
        RETURN_IF_ERROR(Read(8, &p));
        break;     // FRAME
      case '.': {  // STOP
        ASSIGN_OR_RETURN(ValuePtr result, Pop());
        return result;
      }
      case '(':
        charged_ += kSlotBytes;  // a size_t, and the vector's doubling
        marks_.push_back(stack_.size());
        break;  // MARK
      case '0':
        RETURN_IF_ERROR(Pop().status());
        break;  // POP
      case '1':
        RETURN_IF_ERROR(PopToMark().status());
        break;   // POP_MARK
      case '2':  // DUP
        if (stack_.empty()) return Error("DUP on an empty stack");
        Push(stack_.back());
        break;
      case '}':
        Push(MakeValue(K::kDict));
        break;  // EMPTY_DICT
      case ']':
        Push(MakeValue(K::kList));
        break;  // EMPTY_LIST
      case ')':
        Push(MakeValue(K::kTuple));
        break;  // EMPTY_TUPLE
      case 't':
      case 'l':
      case 'd': {  // TUPLE, LIST, DICT
        ASSIGN_OR_RETURN(std::vector<ValuePtr> items, PopToMark());
        ValuePtr v = MakeValue(op == 't' ? K::kTuple : op == 'l' ? K::kList : K::kDict);
        if (op == 'd') {
          if (items.size() % 2 != 0) return Error("DICT has an odd number of items");
          for (size_t i = 0; i < items.size(); i += 2)
            v->entries.emplace_back(items[i], items[i + 1]);
        } else {
          v->items = std::move(items);
        }
        Push(std::move(v));
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        ValuePtr v = MakeValue(K::kTuple);
        v->items.resize(op - 0x84);
        for (size_t i = v->items.size(); i-- > 0;) {
          ASSIGN_OR_RETURN(v->items[i], Pop());
        }
        Push(std::move(v));
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'T':
      case 'U':
      case 'B':
      case 'C':
      case 0x8e: {
        // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING, BINBYTES,
        // SHORT_BINBYTES, BINBYTES8: a length, then the bytes.
        const size_t width = (op == 0x8c || op == 'U' || op == 'C') ? 1
                             : (op == 0x8d || op == 0x8e)           ? 8
                                                                    : 4;
        ASSIGN_OR_RETURN(uint64_t n, ReadUint(width));
        if (n > in_.size() - pos_) return Error("string runs past the end");
        RETURN_IF_ERROR(Read(n, &p));
        ValuePtr v = MakeValue(op == 'B' || op == 'C' || op == 0x8e ? K::kBytes : K::kString);
        v->text.assign(p, n);
        Push(std::move(v));
        break;
      }
      case 'J':
      case 'K':
      case 'M':
      case 0x8a: {  // BININT, BININT1, BININT2, LONG1
        uint64_t n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
        if (op == 0x8a) {
          ASSIGN_OR_RETURN(n, ReadUint(1));
          if (n > 8) return Error("LONG1 integer wider than 64 bits");
        }
        ASSIGN_OR_RETURN(uint64_t raw, ReadUint(n));
        int64_t value = static_cast<int64_t>(raw);
        const bool is_signed = op == 'J' || op == 0x8a;
        if (is_signed && n > 0 && n < 8 && (raw >> (8 * n - 1)) & 1) {
          value = static_cast<int64_t>(raw | (~uint64_t{0} << (8 * n)));
        }
        ValuePtr v = MakeValue(K::kInt);
        v->int_value = value;
        Push(std::move(v));
        break;
      }
      case 'N':
        Push(MakeValue(K::kNone));
        break;  // NONE
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        ValuePtr v = MakeValue(K::kBool);
        v->int_value = op == 0x88;
        Push(std::move(v));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        RETURN_IF_ERROR(Read(8, &p));
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(p[i]);
        ValuePtr v = MakeValue(K::kFloat);
        std::memcpy(&v->float_value, &bits, sizeof(bits));
        Push(std::move(v));
        break;
      }
      case 'c': {  // GLOBAL
        ASSIGN_OR_RETURN(std::string module, ReadLine());
        ASSIGN_OR_RETURN(std::string name, ReadLine());
        RETURN_IF_ERROR(PushGlobal(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        ASSIGN_OR_RETURN(ValuePtr name, Pop());
        ASSIGN_OR_RETURN(ValuePtr module, Pop());
        if (name->kind != K::kString || module->kind != K::kString) {
          return Error("STACK_GLOBAL needs two strings");
        }
        RETURN_IF_ERROR(PushGlobal(module->text, name->text));
        break;
      }
      case 'R':
        RETURN_IF_ERROR(Reduce());
        break;  // REDUCE
      case 'Q':
        RETURN_IF_ERROR(PersistentLoad());
        break;  // BINPERSID
      case 'q':
      case 'r':
      case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
        uint64_t index = memo_.size();
        if (op != 0x94) {
          ASSIGN_OR_RETURN(index, ReadUint(op == 'q' ? 1 : 4));
        }
        if (stack_.empty()) return Error("PUT on an empty stack");
        charged_ += kMemoBytes;
        memo_[index] = stack_.back();
        break;
      }
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        ASSIGN_OR_RETURN(uint64_t index, ReadUint(op == 'h' ? 1 : 4));
        const auto it = memo_.find(index);
        if (it == memo_.end()) return Error(absl::StrCat("GET of unset memo entry ", index));
        Push(it->second);
        break;
      }
      case 's':
      case 'u': {  // SETITEM, SETITEMS
        std::vector<ValuePtr> items(2);
        if (op == 's') {
          ASSIGN_OR_RETURN(items[1], Pop());
          ASSIGN_OR_RETURN(items[0], Pop());
        } else {
          ASSIGN_OR_RETURN(items, PopToMark());
        }
        ASSIGN_OR_RETURN(ValuePtr dict, Top(K::kDict, op == 's' ? "SETITEM" : "SETITEMS"));
        if (items.size() % 2 != 0) return Error("SETITEMS has an odd number of items");
        charged_ += items.size() * kSlotBytes;
        for (size_t i = 0; i < items.size(); i += 2) {
          dict->entries.emplace_back(items[i], items[i + 1]);
        }
        break;
      }
      case 'a':
      case 'e': {  // APPEND, APPENDS
        std::vector<ValuePtr> items(1);
        if (op == 'a') {
          ASSIGN_OR_RETURN(items[0], Pop());
        } else {
          ASSIGN_OR_RETURN(items, PopToMark());
        }
        ASSIGN_OR_RETURN(ValuePtr list, Top(K::kList, op == 'a' ? "APPEND" : "APPENDS"));
        charged_ += items.size() * kSlotBytes;
        for (ValuePtr& item : items) list->items.push_back(std::move(item));
        break;
      }
      case 'b': {  // BUILD: only attribute state on a dict (OrderedDict._metadata), ignored
        RETURN_IF_ERROR(Pop().status());
        RETURN_IF_ERROR(Top(K::kDict, "BUILD").status());
        break;
      }
      default:
        return Error(absl::StrFormat("opcode 0x%02x is not supported in a state dict", op));
    }
  }
}

}  // namespace

absl::StatusOr<NamedTensors> UnpickleStateDict(std::string_view pickle, const std::string& label,
                                               const StorageLoader& load_storage) {
  Unpickler unpickler(pickle, label, load_storage);
  ASSIGN_OR_RETURN(ValuePtr root, unpickler.Run());
  if (root->kind != Value::Kind::kDict) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": pickle holds no dict of tensors"));
  }
  NamedTensors tensors;
  std::map<std::string, size_t> index;  // a repeated key keeps its first position, last value
  for (const auto& [key, value] : root->entries) {
    if (key->kind != Value::Kind::kString) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": state dict has a non-string key"));
    }
    if (value->kind != Value::Kind::kTensor) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": state dict entry '", key->text, "' is not a tensor"));
    }
    const auto [it, inserted] = index.emplace(key->text, tensors.size());
    if (inserted) {
      tensors.emplace_back(key->text, value->tensor);
    } else {
      tensors[it->second].second = value->tensor;
    }
  }
  return tensors;
}

}  // namespace anisoscope::analysis
