// Bad input: every case gives a status naming the file and field, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "analysis/checkpoint/checkpoint.h"
#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using absl::StatusCode;

absl::Status LoadStatus(const std::string& name) {
  return Checkpoint::Load(FixturePath(name), FileGate::Host()).status();
}

TEST(CheckpointErrorsTest, TruncatedTorchBinNamesFile) {
  EXPECT_TRUE(StatusIs(LoadStatus("truncated_bin"), StatusCode::kInvalidArgument,
                       "truncated_bin/pytorch_model.bin: "));
}

// Copies fixture `name` to a temp dir with `file` cut to each of ~60 lengths; every load
// must fail with INVALID_ARGUMENT naming the file (or, cut past the data, succeed).
void ExpectEveryTruncationFailsCleanly(const std::string& name, const std::string& file) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("cut_" + name);
  fs::remove_all(dir);
  fs::copy(FixturePath(name), dir);
  std::ifstream in(FixturePath(name) / file, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut = 0; cut < data.size(); cut += 1 + data.size() / 60) {
    std::ofstream(dir / file, std::ios::binary | std::ios::trunc).write(data.data(), cut);
    EXPECT_TRUE(StatusIs(Checkpoint::Load(dir, FileGate::Host()).status(),
                         StatusCode::kInvalidArgument, (dir / file).string() + ": "))
        << "cut at " << cut << " of " << data.size();
  }
  fs::remove_all(dir);
}

TEST(CheckpointErrorsTest, TorchBinTruncatedAnywhereFailsCleanly) {
  ExpectEveryTruncationFailsCleanly("bert_bin", "pytorch_model.bin");
}

TEST(CheckpointErrorsTest, SafetensorsTruncatedAnywhereFailsCleanly) {
  ExpectEveryTruncationFailsCleanly("bert_safetensors", "model.safetensors");
}

TEST(CheckpointErrorsTest, CompressedTorchBinIsRefusedNamingTheRecord) {
  EXPECT_TRUE(StatusIs(LoadStatus("compressed_bin"), StatusCode::kInvalidArgument,
                       "compressed_bin/pytorch_model.bin: record '", "is compressed"));
}

TEST(CheckpointErrorsTest, BigEndianTorchBinIsRefused) {
  EXPECT_TRUE(StatusIs(LoadStatus("big_endian_bin"), StatusCode::kInvalidArgument,
                       "big_endian_bin/pytorch_model.bin: record 'byteorder' is not 'little'"));
}

TEST(CheckpointErrorsTest, PickleWithoutZipIsRejectedAsLegacyFormat) {
  EXPECT_TRUE(StatusIs(LoadStatus("not_zip_bin"), StatusCode::kInvalidArgument,
                       "not_zip_bin/pytorch_model.bin: not a zip archive"));
}

TEST(CheckpointErrorsTest, TruncatedSafetensorsNamesFileAndTensor) {
  const nlohmann::json expect = ReadJson(FixturePath("truncated_safetensors") / "expect.json");
  EXPECT_TRUE(
      StatusIs(LoadStatus("truncated_safetensors"), StatusCode::kInvalidArgument,
               absl::StrCat("model.safetensors: tensor '", expect["tensor"].get<std::string>(),
                            "' data_offsets [", expect["offsets"][0].get<int>(), ", ",
                            expect["offsets"][1].get<int>(), "] end past the data section (",
                            expect["data_size"].get<int>(), " bytes)")));
}

TEST(CheckpointErrorsTest, SafetensorsHeaderLengthPastEndOfFileQuotesNoByteOfIt) {
  const absl::Status status = LoadStatus("header_past_end_safetensors");
  EXPECT_TRUE(StatusIs(status, StatusCode::kInvalidArgument,
                       "header_past_end_safetensors/model.safetensors: header length runs past"));
  EXPECT_EQ(status.message().find("1048576"), std::string::npos) << status;
}

TEST(CheckpointErrorsTest, SafetensorsTooShortForHeaderLength) {
  EXPECT_TRUE(StatusIs(LoadStatus("tiny_safetensors"), StatusCode::kInvalidArgument,
                       "model.safetensors: 2 bytes"));
}

TEST(CheckpointErrorsTest, SafetensorsHeaderThatIsNotJsonNamesFile) {
  EXPECT_TRUE(StatusIs(LoadStatus("bad_json_safetensors"), StatusCode::kInvalidArgument,
                       "model.safetensors: header is not valid JSON"));
}

TEST(CheckpointErrorsTest, SafetensorsOffsetsPastDataSectionNameTensor) {
  EXPECT_TRUE(StatusIs(LoadStatus("offsets_past_end_safetensors"), StatusCode::kInvalidArgument,
                       "model.safetensors: tensor 'w' data_offsets [8, 16] end past the data "
                       "section (8 bytes)"));
}

TEST(CheckpointErrorsTest, SafetensorsOffsetsDisagreeingWithShapeNameTensor) {
  EXPECT_TRUE(
      StatusIs(LoadStatus("size_mismatch_safetensors"), StatusCode::kInvalidArgument,
               "tensor 'w' data_offsets [0, 8] span 8 bytes but shape [3] of F32 needs 12"));
}

TEST(CheckpointErrorsTest, SafetensorsUnknownDtypeNamesTensorAndDtype) {
  EXPECT_TRUE(StatusIs(LoadStatus("unknown_dtype_safetensors"), StatusCode::kInvalidArgument,
                       "tensor 'w' has unsupported dtype 'F8_E4M3'"));
}

TEST(CheckpointErrorsTest, MalformedConfigNamesConfigJsonAndTheByteNotTheText) {
  EXPECT_TRUE(StatusIs(LoadStatus("malformed_config"), StatusCode::kInvalidArgument,
                       "malformed_config/config.json: malformed JSON at byte "));
  EXPECT_EQ(LoadStatus("malformed_config").message().find("last read"), std::string::npos);
  EXPECT_TRUE(StatusIs(ReadConfig(FixturePath("malformed_config"), FileGate::Host()).status(),
                       StatusCode::kInvalidArgument, "config.json"));
}

TEST(CheckpointErrorsTest, MissingConfigIsNotFound) {
  EXPECT_TRUE(StatusIs(LoadStatus("missing_config"), StatusCode::kNotFound,
                       "missing_config/config.json: cannot open"));
}

TEST(CheckpointErrorsTest, DirectoryWithoutWeightsListsWhatWasLookedFor) {
  EXPECT_TRUE(StatusIs(LoadStatus("no_weights"), StatusCode::kNotFound, "no_weights: no weights",
                       "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                       "pytorch_model.bin.index.json"));
}

TEST(CheckpointErrorsTest, MissingDirectoryIsNotFound) {
  EXPECT_TRUE(StatusIs(LoadStatus("does_not_exist"), StatusCode::kNotFound, "does_not_exist"));
}

TEST(CheckpointErrorsTest, ShardListedInIndexButMissingNamesIndexAndShard) {
  EXPECT_TRUE(StatusIs(LoadStatus("missing_shard"), StatusCode::kNotFound,
                       "model.safetensors.index.json: shard 'model-00002-of-00002.safetensors'"));
}

// A copy of the sharded_safetensors fixture whose index has `name` mapped to `shard`.
fs::path ShardedCopyWithMapping(const std::string& copy, const std::string& name,
                                const std::string& shard) {
  const fs::path dir = fs::path(::testing::TempDir()) / copy;
  fs::remove_all(dir);
  fs::copy(FixturePath("sharded_safetensors"), dir);
  nlohmann::json index = ReadJson(dir / "model.safetensors.index.json");
  index["weight_map"][name] = shard;
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  return dir;
}

TEST(CheckpointErrorsTest, IndexMappingATensorToTheWrongShardNamesTensorAndShard) {
  const std::string name = "bert.embeddings.LayerNorm.gamma";  // stored in the first shard
  const fs::path dir =
      ShardedCopyWithMapping("wrong_shard", name, "model-00002-of-00002.safetensors");
  EXPECT_TRUE(StatusIs(Checkpoint::Load(dir, FileGate::Host()).status(),
                       StatusCode::kInvalidArgument,
                       "model.safetensors.index.json: tensor '" + name +
                           "' is mapped to 'model-00002-of-00002.safetensors'"));
  fs::remove_all(dir);
}

TEST(CheckpointErrorsTest, IndexNamingAShardOutsideTheDirectoryIsRejected) {
  const fs::path dir = ShardedCopyWithMapping("escaping_shard", "x", "../model.safetensors");
  EXPECT_TRUE(StatusIs(Checkpoint::Load(dir, FileGate::Host()).status(),
                       StatusCode::kInvalidArgument,
                       "weight_map entry 'x' names '../model.safetensors'"));
  fs::remove_all(dir);
}

TEST(CheckpointErrorsTest, UnknownPickleGlobalIsRejectedWithoutRunningIt) {
  EXPECT_TRUE(StatusIs(LoadStatus("evil_system_bin"), StatusCode::kInvalidArgument,
                       "evil_system_bin/pytorch_model.bin: pickle global 'posix.system' is not "
                       "allowed in a state dict"));
  EXPECT_TRUE(StatusIs(LoadStatus("evil_eval_bin"), StatusCode::kInvalidArgument,
                       "evil_eval_bin/pytorch_model.bin: pickle global '__builtin__.eval' is not "
                       "allowed in a state dict"));
  EXPECT_FALSE(fs::exists(FixturePath("pwned")));
}

}  // namespace
}  // namespace anisoscope::analysis
