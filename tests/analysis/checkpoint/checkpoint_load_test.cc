// Round trips: every supported layout loads the values the fixture script wrote.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "analysis/checkpoint/checkpoint.h"
#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

// Loads a fixture; a failure throws, which fails just the calling test.
Checkpoint LoadOrDie(const std::string& name) {
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Load(FixturePath(name), FileGate::Host());
  if (!checkpoint.ok()) throw std::runtime_error(checkpoint.status().ToString());
  return *std::move(checkpoint);
}

uint64_t SizeOf(const std::string& dir, const std::string& file) {
  return fs::file_size(FixturePath(dir) / file);
}

TEST(CheckpointLoadTest, TorchSaveStateDictWithMetadataRoundTrips) {
  const Checkpoint checkpoint = LoadOrDie("bert_bin");
  ExpectMatchesExpectedJson(checkpoint);
  EXPECT_EQ(checkpoint.config()["hidden_size"], 8);
  EXPECT_EQ(checkpoint.config_path(), FixturePath("bert_bin") / "config.json");
  ASSERT_EQ(checkpoint.weight_files().size(), 1u);
  EXPECT_EQ(checkpoint.weight_files()[0].filename(), "pytorch_model.bin");
  EXPECT_EQ(checkpoint.size_bytes(), SizeOf("bert_bin", "pytorch_model.bin"));
  const StoredTensor* gamma = checkpoint.Find("bert.embeddings.LayerNorm.gamma");
  ASSERT_NE(gamma, nullptr);
  EXPECT_EQ(gamma->file.filename(), "pytorch_model.bin");
  EXPECT_EQ(checkpoint.Find("_metadata"), nullptr);
  EXPECT_EQ(checkpoint.Find("no.such.tensor"), nullptr);
}

TEST(CheckpointLoadTest, TorchBinTensorsViewTheMappedFileWithoutACopy) {
  const Checkpoint checkpoint = LoadOrDie("bert_bin");
  const at::Tensor& word = checkpoint.Find("bert.embeddings.word_embeddings.weight")->tensor;
  const at::Tensor& gamma = checkpoint.Find("bert.embeddings.LayerNorm.gamma")->tensor;
  // Storages are 64-byte aligned records of one mapping: views, not copies.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(word.data_ptr()) % 64, 0u);
  const auto distance = std::abs(static_cast<const char*>(word.data_ptr()) -
                                 static_cast<const char*>(gamma.data_ptr()));
  EXPECT_LT(static_cast<uint64_t>(distance), SizeOf("bert_bin", "pytorch_model.bin"));
}

TEST(CheckpointLoadTest, Zip64RecordsNotAlignedForTheirDtypeStillLoad) {
  ExpectMatchesExpectedJson(LoadOrDie("zip64_bin"));
}

TEST(CheckpointLoadTest, SafetensorsRoundTripsIncludingExtraIntegerTensors) {
  const Checkpoint checkpoint = LoadOrDie("bert_safetensors");
  ExpectMatchesExpectedJson(checkpoint);
  const StoredTensor* position_ids = checkpoint.Find("bert.embeddings.position_ids");
  ASSERT_NE(position_ids, nullptr);
  EXPECT_EQ(position_ids->tensor.scalar_type(), at::kLong);
  EXPECT_EQ(checkpoint.size_bytes(), SizeOf("bert_safetensors", "model.safetensors"));
}

TEST(CheckpointLoadTest, SafetensorsTensorsAreWritableWithoutTouchingTheFile) {
  const fs::path file = FixturePath("bert_safetensors") / "model.safetensors";
  const uint64_t size = fs::file_size(file);
  {
    Checkpoint checkpoint = LoadOrDie("bert_safetensors");
    at::Tensor gamma = checkpoint.Find("bert.embeddings.LayerNorm.gamma")->tensor;
    gamma.fill_(7.0f);  // private mapping: copy-on-write
    EXPECT_EQ(gamma[0].item<float>(), 7.0f);
  }
  ExpectMatchesExpectedJson(LoadOrDie("bert_safetensors"));
  EXPECT_EQ(fs::file_size(file), size);
}

TEST(CheckpointLoadTest, TensorsOutliveTheCheckpoint) {
  at::Tensor kept;
  at::Tensor kept_bin;
  {
    kept = LoadOrDie("bert_safetensors").Find("bert.embeddings.LayerNorm.beta")->tensor;
    kept_bin = LoadOrDie("bert_bin").Find("bert.embeddings.LayerNorm.beta")->tensor;
  }
  EXPECT_TRUE(at::equal(kept, kept_bin));
}

TEST(CheckpointLoadTest, UnpaddedSafetensorsHeaderGivesMisalignedDataThatStillLoads) {
  const fs::path file = FixturePath("unpadded_safetensors") / "model.safetensors";
  std::ifstream in(file, std::ios::binary);
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  EXPECT_EQ(header_size % 2, 1u);
  ExpectMatchesExpectedJson(LoadOrDie("unpadded_safetensors"));
}

TEST(CheckpointLoadTest, SafetensorsPreferredWhenBothFormatsExist) {
  const Checkpoint checkpoint = LoadOrDie("both_formats");
  ExpectMatchesExpectedJson(checkpoint);  // the .bin holds zeros
  ASSERT_EQ(checkpoint.weight_files().size(), 1u);
  EXPECT_EQ(checkpoint.weight_files()[0].filename(), "model.safetensors");
  EXPECT_EQ(checkpoint.size_bytes(), SizeOf("both_formats", "model.safetensors"));
}

TEST(CheckpointLoadTest, ShardedSafetensorsLoadEachShardOnce) {
  const Checkpoint checkpoint = LoadOrDie("sharded_safetensors");
  ExpectMatchesExpectedJson(checkpoint);
  ASSERT_EQ(checkpoint.weight_files().size(), 2u);
  EXPECT_EQ(checkpoint.weight_files()[0].filename(), "model-00001-of-00002.safetensors");
  EXPECT_EQ(checkpoint.weight_files()[1].filename(), "model-00002-of-00002.safetensors");
  EXPECT_EQ(checkpoint.size_bytes(),
            SizeOf("sharded_safetensors", "model-00001-of-00002.safetensors") +
                SizeOf("sharded_safetensors", "model-00002-of-00002.safetensors"));
  const nlohmann::json index =
      ReadJson(FixturePath("sharded_safetensors") / "model.safetensors.index.json");
  for (const auto& [name, shard] : index["weight_map"].items()) {
    EXPECT_EQ(checkpoint.Find(name)->file.filename(), shard.get<std::string>()) << name;
  }
}

TEST(CheckpointLoadTest, ShardedTorchBinRoundTrips) {
  const Checkpoint checkpoint = LoadOrDie("sharded_bin");
  ExpectMatchesExpectedJson(checkpoint);
  ASSERT_EQ(checkpoint.weight_files().size(), 2u);
  EXPECT_EQ(checkpoint.weight_files()[1].filename(), "pytorch_model-00002-of-00002.bin");
  EXPECT_EQ(checkpoint.size_bytes(), SizeOf("sharded_bin", "pytorch_model-00001-of-00002.bin") +
                                         SizeOf("sharded_bin", "pytorch_model-00002-of-00002.bin"));
}

TEST(CheckpointLoadTest, HalfAndBfloat16KeepTheirStoredDtype) {
  for (const char* name : {"f16_safetensors", "f16_bin", "bf16_safetensors", "bf16_bin"}) {
    SCOPED_TRACE(name);
    const Checkpoint checkpoint = LoadOrDie(name);
    ExpectMatchesExpectedJson(checkpoint);
    const at::ScalarType want = std::string(name).rfind("bf16", 0) == 0 ? at::kBFloat16 : at::kHalf;
    EXPECT_EQ(
        checkpoint.Find("bert.encoder.layer.0.attention.self.query.weight")->tensor.scalar_type(),
        want);
  }
}

TEST(CheckpointLoadTest, TensorsSharingAStorageAreViewsOfOneBuffer) {
  const Checkpoint checkpoint = LoadOrDie("shared_storage_bin");
  ExpectMatchesExpectedJson(checkpoint);
  const at::Tensor& a = checkpoint.Find("a")->tensor;
  const at::Tensor& b = checkpoint.Find("b")->tensor;
  const at::Tensor& c = checkpoint.Find("c")->tensor;
  EXPECT_TRUE(a.storage().is_alias_of(b.storage()));
  EXPECT_EQ(b.storage_offset(), 1);
  EXPECT_EQ(static_cast<const char*>(b.data_ptr()), static_cast<const char*>(a.data_ptr()) + 4);
  EXPECT_FALSE(c.is_contiguous());
  EXPECT_EQ(c.strides().vec(), (std::vector<int64_t>{1, 3}));
  const at::Tensor& h2 = checkpoint.Find("h2")->tensor;
  EXPECT_EQ(h2.storage_offset(), 1);
  EXPECT_EQ(h2.strides().vec(), (std::vector<int64_t>{5}));
  EXPECT_TRUE(h2.storage().is_alias_of(checkpoint.Find("h")->tensor.storage()));
}

TEST(CheckpointLoadTest, ReadConfigParsesConfigJson) {
  absl::StatusOr<nlohmann::json> config = ReadConfig(FixturePath("bert_bin"), FileGate::Host());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)["model_type"], "bert");
}

}  // namespace
}  // namespace anisoscope::analysis
