// The pickle interpreter on hand-made pickles: what it accepts and what it refuses.
#include "analysis/checkpoint/state_dict_unpickler.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "common/process_memory.h"
#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {
namespace {

using absl::StatusCode;

std::string Unicode(const std::string& s) {
  std::string out = "X";
  const uint32_t n = s.size();
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + s;
}

// {name: _rebuild_tensor_v2(storage '0' of FloatStorage[numel], offset, (size,), (1,), False,
// OrderedDict())}, as torch.save writes it.
std::string OneTensorPickle(const std::string& name, int numel, int offset, int size) {
  std::string p = std::string("\x80\x02}q\x00(", 6) + Unicode(name);
  p += "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(" + Unicode("storage") + "ctorch\nFloatStorage\n" + Unicode("0") + Unicode("cpu");
  p += "K" + std::string(1, static_cast<char>(numel)) + "tQ";
  p += "K" + std::string(1, static_cast<char>(offset));
  p += "K" + std::string(1, static_cast<char>(size)) + "\x85K\x01\x85\x89";
  p += "ccollections\nOrderedDict\n)RtRu.";
  return p;
}

StorageLoader ArangeLoader(int* calls) {
  return [calls](const std::string& key, at::ScalarType dtype, int64_t numel) {
    ++*calls;
    EXPECT_EQ(key, "0");
    return absl::StatusOr<at::Tensor>(at::arange(numel, at::TensorOptions().dtype(dtype)));
  };
}

TEST(StateDictUnpicklerTest, RebuildsAStridedViewOfTheLoadedStorage) {
  int calls = 0;
  absl::StatusOr<NamedTensors> tensors =
      UnpickleStateDict(OneTensorPickle("w", 6, 2, 3), "f.bin", ArangeLoader(&calls));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].first, "w");
  EXPECT_TRUE(at::equal((*tensors)[0].second, at::arange(2, 5, at::kFloat)));
  EXPECT_EQ(calls, 1);
}

TEST(StateDictUnpicklerTest, ViewPastTheEndOfItsStorageIsRejected) {
  int calls = 0;
  EXPECT_TRUE(StatusIs(
      UnpickleStateDict(OneTensorPickle("w", 4, 2, 3), "f.bin", ArangeLoader(&calls)).status(),
      StatusCode::kInvalidArgument, "f.bin: pickle tensor view", "runs past its storage"));
}

TEST(StateDictUnpicklerTest, TruncatedPickleIsRejected) {
  int calls = 0;
  const std::string full = OneTensorPickle("w", 6, 0, 6);
  for (size_t cut : {size_t{1}, size_t{10}, full.size() / 2, full.size() - 1}) {
    EXPECT_TRUE(
        StatusIs(UnpickleStateDict(full.substr(0, cut), "f.bin", ArangeLoader(&calls)).status(),
                 StatusCode::kInvalidArgument, "f.bin: pickle"))
        << cut;
  }
}

TEST(StateDictUnpicklerTest, StackGlobalOutsideTheAllowListIsRejected) {
  int calls = 0;
  const std::string p =
      "\x80\x04" + Unicode("builtins") + Unicode("exec") + "\x93" + Unicode("print(1)") + "\x85R.";
  EXPECT_TRUE(StatusIs(UnpickleStateDict(p, "f.bin", ArangeLoader(&calls)).status(),
                       StatusCode::kInvalidArgument,
                       "f.bin: pickle global 'builtins.exec' is not allowed in a state dict"));
}

TEST(StateDictUnpicklerTest, ObjectBuildingOpcodesAreUnsupported) {
  int calls = 0;
  const std::string p = std::string("\x80\x02") + "ccollections\nOrderedDict\n)\x81.";  // NEWOBJ
  EXPECT_TRUE(StatusIs(UnpickleStateDict(p, "f.bin", ArangeLoader(&calls)).status(),
                       StatusCode::kInvalidArgument, "opcode 0x81 is not supported"));
}

TEST(StateDictUnpicklerTest, GetOfAnUnsetMemoEntryIsRejected) {
  int calls = 0;
  EXPECT_TRUE(StatusIs(UnpickleStateDict("\x80\x02h\x05.", "f.bin", ArangeLoader(&calls)).status(),
                       StatusCode::kInvalidArgument, "GET of unset memo entry 5"));
}

TEST(StateDictUnpicklerTest, NonTensorValuesAndNonDictRootsAreRejected) {
  int calls = 0;
  EXPECT_TRUE(StatusIs(
      UnpickleStateDict("\x80\x02}(" + Unicode("step") + "K\x05u.", "f.bin", ArangeLoader(&calls))
          .status(),
      StatusCode::kInvalidArgument, "state dict entry 'step' is not a tensor"));
  EXPECT_TRUE(StatusIs(UnpickleStateDict("\x80\x02].", "f.bin", ArangeLoader(&calls)).status(),
                       StatusCode::kInvalidArgument, "no dict of tensors"));
}

std::string Index4(uint32_t i) {
  std::string out;
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((i >> (8 * b)) & 0xff));
  return out;
}

TEST(StateDictUnpicklerTest, DeeplyNestedAndCyclicContainersFreeWithoutCrashing) {
  int calls = 0;
  // root = []; each level appends a new list to the previous one: 300000 levels deep.
  std::string p = "\x80\x02]r" + Index4(0);
  constexpr uint32_t kDepth = 300000;
  for (uint32_t i = 0; i < kDepth; ++i) p += "j" + Index4(i) + "]r" + Index4(i + 1) + "a0";
  p += "j" + Index4(kDepth) + "j" + Index4(0) + "a0";  // the innermost list holds the root
  p += "j" + Index4(0) + ".";
  // The object budget stops the chain some 60000 levels deep: those free without recursion.
  EXPECT_TRUE(StatusIs(UnpickleStateDict(p, "f.bin", ArangeLoader(&calls)).status(),
                       StatusCode::kInvalidArgument, "f.bin: pickle builds more objects"));
  const std::string shallow = p.substr(0, 8 + 13 * 30000) + "j" + Index4(0) + ".";
  EXPECT_TRUE(StatusIs(UnpickleStateDict(shallow, "f.bin", ArangeLoader(&calls)).status(),
                       StatusCode::kInvalidArgument, "no dict of tensors"));
}

TEST(StateDictUnpicklerTest, LoaderErrorsPropagate) {
  const StorageLoader failing = [](const std::string&, at::ScalarType, int64_t) {
    return absl::StatusOr<at::Tensor>(absl::InvalidArgumentError("f.bin: storage gone"));
  };
  EXPECT_TRUE(StatusIs(UnpickleStateDict(OneTensorPickle("w", 6, 0, 6), "f.bin", failing).status(),
                       StatusCode::kInvalidArgument, "f.bin: storage gone"));
}


// The byte of the pickle an error says it stopped at.
uint64_t StoppedAt(const absl::Status& status) {
  const std::string message(status.message());
  const size_t at = message.rfind("(at byte ");
  return at == std::string::npos ? UINT64_MAX : std::stoull(message.substr(at + 9));
}

TEST(StateDictUnpicklerTest, ObjectFloodsAreRefusedWithinABudgetOfThePicklesSize) {
  // The finding: 8 MiB of EMPTY_LIST held 1.4 GiB (175 bytes per byte) until STOP. Each
  // flood is stopped at 2 bytes of objects per byte of pickle plus 16 MiB.
  constexpr size_t kSize = size_t{8} << 20;
  int calls = 0;
  for (const char op : {']', '}', 'N', '(', ')'}) {
    const std::string flood = "\x80\x02" + std::string(kSize, op) + ".";
    const uint64_t before = PeakResidentBytes();
    const absl::Status status = UnpickleStateDict(flood, "f.bin", ArangeLoader(&calls)).status();
    EXPECT_TRUE(StatusIs(status, StatusCode::kInvalidArgument, "f.bin: pickle builds more objects",
                         "not a state dict"))
        << op;
    EXPECT_LT(StoppedAt(status), kSize / 2) << op << ": " << status;
    EXPECT_LT(PeakResidentBytes() - before, uint64_t{64} << 20) << op;
  }
  // DUP and GET add references, not objects: charged all the same.
  for (const std::string& each : {std::string("2"), std::string("h\0", 2)}) {
    std::string refs = std::string("\x80\x02]q\x00", 5);
    while (refs.size() < kSize) refs += each;
    const absl::Status status =
        UnpickleStateDict(refs + ".", "f.bin", ArangeLoader(&calls)).status();
    EXPECT_TRUE(StatusIs(status, StatusCode::kInvalidArgument, "builds more objects")) << each;
  }
  EXPECT_EQ(calls, 0);
}

TEST(StateDictUnpicklerTest, AViewThatRepeatsItsStorageIsRefused) {
  // {w: a [64, 64] view of a 1-element storage with strides (0, 0)}: a copy would be 4096x.
  std::string p = std::string("\x80\x02}q\x00(", 6) + Unicode("w");
  p += "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(" + Unicode("storage") + "ctorch\nFloatStorage\n" + Unicode("0") + Unicode("cpu");
  p += std::string("K\x01tQK\0K@K@\x86K\0K\0\x86\x89", 17);
  p += "ccollections\nOrderedDict\n)RtRu.";
  int calls = 0;
  EXPECT_TRUE(StatusIs(UnpickleStateDict(p, "f.bin", ArangeLoader(&calls)).status(),
                       StatusCode::kInvalidArgument,
                       "f.bin: pickle tensor view of 4096 elements repeats its storage of 1"));
}

}  // namespace
}  // namespace anisoscope::analysis
