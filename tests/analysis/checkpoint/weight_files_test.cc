#include "analysis/checkpoint/weight_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/analysis/checkpoint/checkpoint_test_util.h"
#include "tests/common/test_temp_dir.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

class WholeCheckpointTest : public ::testing::Test {
 protected:
  static std::string Read(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Writes the first `bytes` of `from` to `dir_/name`, as a writer still saving it.
  void WritePrefix(const fs::path& from, const std::string& name, size_t bytes) {
    const std::string content = Read(from);
    std::ofstream(dir_ / name, std::ios::binary) << content.substr(0, bytes);
  }

  const TestTempDir temp_;
  const fs::path dir_ = temp_.path();
};

TEST_F(WholeCheckpointTest, WrittenFixturesAreWhole) {
  for (const char* name :
       {"bert_safetensors", "bert_bin", "sharded_safetensors", "sharded_bin", "zip64_bin"}) {
    EXPECT_TRUE(CheckCheckpointComplete(FixturePath(name), FileGate::Host()).ok())
        << name << ": " << CheckCheckpointComplete(FixturePath(name), FileGate::Host());
  }
}

TEST_F(WholeCheckpointTest, EveryPrefixOfASafetensorsFileIsNotWhole) {
  const fs::path source = FixturePath("bert_safetensors");
  fs::copy_file(source / "config.json", dir_ / "config.json");
  const size_t size = fs::file_size(source / "model.safetensors");
  for (const size_t bytes : {size_t{0}, size_t{5}, size_t{8}, size_t{100}, size / 2, size - 1}) {
    WritePrefix(source / "model.safetensors", "model.safetensors", bytes);
    EXPECT_TRUE(StatusIs(CheckCheckpointComplete(dir_, FileGate::Host()),
                         absl::StatusCode::kUnavailable, "model.safetensors"))
        << bytes << " of " << size;
  }
  WritePrefix(source / "model.safetensors", "model.safetensors", size);
  EXPECT_TRUE(CheckCheckpointComplete(dir_, FileGate::Host()).ok());
}

TEST_F(WholeCheckpointTest, ATorchZipIsWholeOnceItsCentralDirectoryReads) {
  const fs::path source = FixturePath("bert_bin");
  fs::copy_file(source / "config.json", dir_ / "config.json");
  const size_t size = fs::file_size(source / "pytorch_model.bin");
  for (const size_t bytes : {size_t{0}, size_t{30}, size / 2, size - 10, size - 1}) {
    WritePrefix(source / "pytorch_model.bin", "pytorch_model.bin", bytes);
    EXPECT_TRUE(StatusIs(CheckCheckpointComplete(dir_, FileGate::Host()),
                         absl::StatusCode::kUnavailable, "central directory"))
        << bytes << " of " << size;
  }
  WritePrefix(source / "pytorch_model.bin", "pytorch_model.bin", size);
  EXPECT_TRUE(CheckCheckpointComplete(dir_, FileGate::Host()).ok());
}

TEST_F(WholeCheckpointTest, ConfigFirstThenWeightsThenEveryShard) {
  const fs::path source = FixturePath("sharded_safetensors");
  EXPECT_TRUE(StatusIs(CheckCheckpointComplete(dir_, FileGate::Host()),
                       absl::StatusCode::kUnavailable, "config.json"));
  WritePrefix(source / "config.json", "config.json", 10);  // half a JSON object
  EXPECT_TRUE(StatusIs(CheckCheckpointComplete(dir_, FileGate::Host()),
                       absl::StatusCode::kUnavailable, "config.json"));
  fs::copy_file(source / "config.json", dir_ / "config.json", fs::copy_options::overwrite_existing);
  EXPECT_TRUE(StatusIs(CheckCheckpointComplete(dir_, FileGate::Host()),
                       absl::StatusCode::kUnavailable, "no weights"));
  fs::copy_file(source / "model.safetensors.index.json", dir_ / "model.safetensors.index.json");
  fs::copy_file(source / "model-00001-of-00002.safetensors",
                dir_ / "model-00001-of-00002.safetensors");
  EXPECT_TRUE(StatusIs(CheckCheckpointComplete(dir_, FileGate::Host()),
                       absl::StatusCode::kUnavailable, "model-00002-of-00002.safetensors"));
  fs::copy_file(source / "model-00002-of-00002.safetensors",
                dir_ / "model-00002-of-00002.safetensors");
  EXPECT_TRUE(CheckCheckpointComplete(dir_, FileGate::Host()).ok());
}

TEST_F(WholeCheckpointTest, FindWeightFilesPrefersSingleSafetensors) {
  const absl::StatusOr<WeightFiles> both =
      FindWeightFiles(FixturePath("both_formats"), FileGate::Host());
  ASSERT_TRUE(both.ok()) << both.status();
  ASSERT_EQ(both->files.size(), 1u);
  EXPECT_EQ(both->files[0].filename(), "model.safetensors");
  const absl::StatusOr<WeightFiles> sharded =
      FindWeightFiles(FixturePath("sharded_bin"), FileGate::Host());
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(sharded->format, WeightFormat::kTorchZip);
  EXPECT_EQ(sharded->files.size(), 2u);
}

}  // namespace
}  // namespace anisoscope::analysis
