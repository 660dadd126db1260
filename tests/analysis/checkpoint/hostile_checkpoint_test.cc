// Hostile safetensors files (issue 37): a header of 400k entries parses in linear time;
// overlapping, gapped or over-long layouts are refused naming the file and the tensor, as
// the reference validator refuses them; a misaligned tensor is a view until it is used.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/checkpoint/safetensors_header.h"
#include "analysis/checkpoint/safetensors_reader.h"
#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using absl::StatusCode;

// One header entry of an F32 tensor of `numel` elements at [begin, begin + 4 numel].
std::string Entry(const std::string& name, uint64_t begin, uint64_t numel) {
  return absl::StrCat("\"", name, "\":{\"dtype\":\"F32\",\"shape\":[", numel,
                      "],\"data_offsets\":[", begin, ",", begin + 4 * numel, "]}");
}

// Writes a safetensors file of `entries` (JSON members) and `data_size` zero bytes, its
// header padded with spaces to a multiple of 8 plus `misalign`.
fs::path WriteFile(const std::string& name, const std::vector<std::string>& entries,
                   uint64_t data_size, size_t misalign = 0) {
  std::string header = "{";
  for (size_t i = 0; i < entries.size(); ++i) header += (i ? "," : "") + entries[i];
  header += "}";
  header.append((8 - header.size() % 8) % 8 + misalign, ' ');
  const fs::path file = fs::path(::testing::TempDir()) / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), 8);  // little-endian host
  out << header << std::string(data_size, '\0');
  return file;
}

absl::Status ReadStatus(const fs::path& file) {
  return ReadSafetensors(file, FileGate::Host()).status();
}

// A header of `count` one-element F32 entries, laid out as the format wants.
std::string FloodHeader(uint64_t count) {
  std::string header = "{";
  for (uint64_t i = 0; i < count; ++i) {
    header += (i ? "," : "") + Entry(absl::StrCat("model.layers.", i, ".weight"), 4 * i, 1);
  }
  return header + "}";
}

TEST(HostileCheckpointTest, HeaderOf400kEntriesParsesInLinearTime) {
  const std::string header = FloodHeader(400000);  // 24 MB: ordered_json took ~8 minutes
  ASSERT_GT(header.size(), size_t{20} << 20);
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<std::vector<SafetensorsEntry>> entries = ParseSafetensorsHeader(header, "f");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0);  // well under a second here; a quadratic parse takes minutes
  // Read up to the most tensors a file may hold, then refused: no tensor is made.
  EXPECT_TRUE(StatusIs(entries.status(), StatusCode::kInvalidArgument,
                       "f: header lists more than 65536 tensors"));
  // Within the bound, the whole file loads, in time linear in it.
  const uint64_t count = kMaxSafetensorsTensors;
  std::vector<std::string> members;
  for (uint64_t i = 0; i < count; ++i) members.push_back(Entry(absl::StrCat("t", i), 4 * i, 1));
  const fs::path file = WriteFile("flood.safetensors", members, 4 * count);
  const absl::StatusOr<NamedTensors> tensors = ReadSafetensors(file, FileGate::Host());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_EQ(tensors->size(), count);
  fs::remove(file);
}

TEST(HostileCheckpointTest, OverlappingTensorsAreRefusedNamingFileAndTensor) {
  // The finding: 40 tensors over one misaligned span, each copied (+735 MiB), stored DONE.
  std::vector<std::string> entries = {Entry("first", 0, 4)};
  for (int i = 0; i < 40; ++i) entries.push_back(Entry(absl::StrCat("over", i), 2, 4));
  const fs::path file = WriteFile("overlap.safetensors", entries, 18);
  EXPECT_TRUE(StatusIs(ReadStatus(file), StatusCode::kInvalidArgument, file.string() + ": tensor '",
                       "data_offsets [2, 18] overlaps tensor '",
                       "(the format forbids overlapping tensors)"));
}

TEST(HostileCheckpointTest, GapsAndUnusedDataAreRefusedAsTheReferenceValidatorDoes) {
  const fs::path gap = WriteFile("gap.safetensors", {Entry("a", 0, 1), Entry("b", 8, 1)}, 12);
  EXPECT_TRUE(StatusIs(ReadStatus(gap), StatusCode::kInvalidArgument,
                       "tensor 'b' data_offsets [8, 12] leaves bytes [4, 8) of the data unused"));
  const fs::path late = WriteFile("late.safetensors", {Entry("a", 4, 1)}, 8);
  EXPECT_TRUE(StatusIs(ReadStatus(late), StatusCode::kInvalidArgument,
                       "tensor 'a' data_offsets [4, 8] leaves bytes [0, 4)"));
  const fs::path tail = WriteFile("tail.safetensors", {Entry("a", 0, 1)}, 4096);
  EXPECT_TRUE(StatusIs(ReadStatus(tail), StatusCode::kInvalidArgument,
                       "tail.safetensors: the tensors end at byte 4 of a data section of 4096"));
  const fs::path empty = WriteFile("empty.safetensors", {}, 0);
  EXPECT_TRUE(ReadStatus(empty).ok()) << ReadStatus(empty);
}

TEST(HostileCheckpointTest, ATensorNamedTwiceIsRefused) {
  const fs::path file = WriteFile("twice.safetensors", {Entry("a", 0, 1), Entry("a", 4, 1)}, 8);
  EXPECT_TRUE(
      StatusIs(ReadStatus(file), StatusCode::kInvalidArgument, "tensor 'a' is named twice"));
}

TEST(HostileCheckpointTest, ErrorsQuoteNoLongRunOfTheFile) {
  const std::string name(100000, 'n');
  const fs::path file = WriteFile("long.safetensors", {Entry(name, 0, 1), Entry("b", 0, 1)}, 4);
  const absl::Status status = ReadStatus(file);
  EXPECT_TRUE(StatusIs(status, StatusCode::kInvalidArgument, "... (100000 bytes)"));
  EXPECT_LT(status.message().size(), 1000u) << status.message().size();
  const fs::path dtype = WriteFile("dtype.safetensors",
                                   {absl::StrCat("\"w\":{\"dtype\":\"", std::string(5000, 'X'),
                                                 "\",\"shape\":[],\"data_offsets\":[0,0]}")},
                                   0);
  EXPECT_TRUE(StatusIs(ReadStatus(dtype), StatusCode::kInvalidArgument,
                       "tensor 'w' has unsupported dtype of 5000 bytes"));
  const fs::path negative =
      WriteFile("negative.safetensors",
                {"\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}"}, 0);
  EXPECT_TRUE(StatusIs(ReadStatus(negative), StatusCode::kInvalidArgument,
                       "tensor 'w' field 'shape' holds a value that is not a non-negative"));
}

TEST(HostileCheckpointTest, MetadataAndUnknownFieldsAreSkippedWhateverTheirShape) {
  const fs::path file =
      WriteFile("meta.safetensors",
                {"\"__metadata__\":{\"format\":\"pt\",\"deep\":[[[{\"x\":[1,2]}]]]}",
                 "\"w\":{\"extra\":{\"a\":[1,{\"b\":2}]},\"dtype\":\"F32\",\"shape\":[2],"
                 "\"data_offsets\":[0,8]}"},
                8);
  const absl::StatusOr<NamedTensors> tensors = ReadSafetensors(file, FileGate::Host());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].first, "w");
}

TEST(HostileCheckpointTest, AMisalignedTensorIsAViewUntilUsedThenAnAlignedCopy) {
  const fs::path dir = fs::path(::testing::TempDir()) / "misaligned";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << "{}";
  fs::rename(WriteFile("m.safetensors", {Entry("a", 0, 16), Entry("b", 64, 16)}, 128,
                       /*misalign=*/1),
             dir / "model.safetensors");
  const absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Load(dir, FileGate::Host());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const StoredTensor* stored = checkpoint->Find("a");
  ASSERT_NE(stored, nullptr);
  // Loading copies nothing: the tensor views the mapping where the file puts it.
  EXPECT_NE(reinterpret_cast<uintptr_t>(stored->tensor.data_ptr()) % 4, 0u);
  const at::Tensor aligned = stored->Aligned();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(aligned.data_ptr()) % 4, 0u);
  EXPECT_NE(aligned.data_ptr(), stored->tensor.data_ptr());
  EXPECT_TRUE(at::equal(aligned, at::zeros({16})));
}

TEST(HostileCheckpointTest, AnAlignedTensorIsUsedWithoutACopy) {
  const fs::path file = WriteFile("aligned.safetensors", {Entry("a", 0, 16)}, 64);
  const absl::StatusOr<NamedTensors> tensors = ReadSafetensors(file, FileGate::Host());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  const StoredTensor stored{(*tensors)[0].second, file};
  EXPECT_EQ(stored.Aligned().data_ptr(), stored.tensor.data_ptr());
}

TEST(HostileCheckpointTest, TheHeaderParserReadsTheEntriesInOrder) {
  const absl::StatusOr<std::vector<SafetensorsEntry>> entries = ParseSafetensorsHeader(
      "{\"b\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]}}",
      "f");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].name, "b");
  EXPECT_EQ((*entries)[0].shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ((*entries)[1].data_offsets, (std::vector<uint64_t>{12, 16}));
  EXPECT_TRUE(CheckSafetensorsLayout(*entries, 16, "f").ok());
  EXPECT_TRUE(StatusIs(ParseSafetensorsHeader("[1]", "f").status(), StatusCode::kInvalidArgument,
                       "f: header is not a JSON object"));
  EXPECT_TRUE(StatusIs(ParseSafetensorsHeader("{\"a\":{", "f").status(),
                       StatusCode::kInvalidArgument, "f: header is not valid JSON"));
}

}  // namespace
}  // namespace anisoscope::analysis
