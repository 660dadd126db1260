// Bad checkpoints fail CreateModel with a status naming the file and the field or tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/transformer_model.h"
#include "common/process_memory.h"
#include "tests/analysis/checkpoint/checkpoint_test_util.h"
#include "tests/analysis/models/tiny_checkpoint.h"

namespace anisoscope::analysis {
namespace {

using absl::StatusCode;

absl::Status CreateStatus(const TinyCheckpoint& tiny) {
  const auto dir = tiny.Write(TestDir());
  auto checkpoint = Checkpoint::Load(dir, FileGate::Host());
  if (!checkpoint.ok()) return checkpoint.status();
  return CreateModel(*checkpoint, {}).status();
}

TEST(ModelErrorsTest, UnknownFamilyListsSupportedOnes) {
  TinyCheckpoint tiny = TinyGPT2();
  tiny.config["model_type"] = "mamba";
  EXPECT_TRUE(StatusIs(CreateStatus(tiny), StatusCode::kInvalidArgument, "config.json",
                       "'mamba' is not supported", "bert", "gpt_neox", "gpt2", "llama", "olmo2"));
}

TEST(ModelErrorsTest, ArchitecturesSelectTheFamilyWithoutModelType) {
  for (const auto& [tiny, family] :
       {std::pair{TinyNeoX(), "gpt_neox"}, std::pair{TinyGPT2(), "gpt2"},
        std::pair{TinyLlama(), "llama"}, std::pair{TinyLlama(/*olmo2=*/true), "olmo2"}}) {
    TinyCheckpoint copy = tiny;
    copy.config.erase("model_type");
    const auto checkpoint = Checkpoint::Load(copy.Write(TestDir(family)), FileGate::Host());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const auto model = CreateModel(*checkpoint, {});
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->shape().family, family);
    EXPECT_TRUE((*model)->shape().causal);
    EXPECT_EQ((*model)->shape().max_positions, 32);
  }
}

TEST(ModelErrorsTest, MissingNeoXTensorNamesTensorAndFile) {
  TinyCheckpoint tiny = TinyNeoX();
  tiny.tensors.erase("gpt_neox.layers.1.attention.dense.weight");
  EXPECT_TRUE(StatusIs(CreateStatus(tiny), StatusCode::kInvalidArgument,
                       "tensor 'layers.1.attention.dense.weight' is missing", "model.safetensors"));
}

TEST(ModelErrorsTest, WronglyShapedConv1DNamesTensorFileAndShapes) {
  TinyCheckpoint tiny = TinyGPT2();
  at::Tensor& weight = tiny.tensors["transformer.h.0.attn.c_attn.weight"];
  weight = weight.t().contiguous();  // [3d, d]: a Linear layout instead of Conv1D's [d, 3d]
  EXPECT_TRUE(StatusIs(CreateStatus(tiny), StatusCode::kInvalidArgument,
                       "tensor 'transformer.h.0.attn.c_attn.weight'", "model.safetensors",
                       "has shape [48, 16], expected [16, 48]"));
}

TEST(ModelErrorsTest, FusedQkvOfWrongWidthIsRefused) {
  TinyCheckpoint tiny = TinyNeoX();
  tiny.tensors["gpt_neox.layers.0.attention.query_key_value.bias"] = at::zeros({32});
  EXPECT_TRUE(StatusIs(CreateStatus(tiny), StatusCode::kInvalidArgument,
                       "gpt_neox.layers.0.attention.query_key_value.bias", "expected [48]"));
}

TEST(ModelErrorsTest, TensorsWithoutPrefixLoad) {
  TinyCheckpoint tiny = TinyNeoX();
  TinyCheckpoint bare = tiny;
  bare.tensors.clear();
  for (const auto& [name, tensor] : tiny.tensors) {
    const std::string prefix = "gpt_neox.";
    bare.tensors[name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name] = tensor;
  }
  EXPECT_TRUE(CreateStatus(bare).ok()) << CreateStatus(bare);
}

TEST(ModelErrorsTest, MistypedConfigFieldsNameConfigAndField) {
  struct Case {
    TinyCheckpoint tiny;
    std::string field;
    nlohmann::json value;
    std::string message;
  };
  const Case cases[] = {
      {TinyGPT2(), "n_head", "2", "field 'n_head' must be a positive integer"},
      {TinyGPT2(), "n_head", 3, "field 'n_embd' (16) is not a multiple of n_head (3)"},
      {TinyGPT2(), "n_inner", 0, "field 'n_inner' must be a positive integer"},
      {TinyGPT2(), "activation_function", "mish", "field 'activation_function' 'mish'"},
      {TinyGPT2(), "reorder_and_upcast_attn", "yes", "field 'reorder_and_upcast_attn' must be"},
      {TinyNeoX(), "hidden_size", nullptr, "field 'hidden_size' must be a positive integer"},
      {TinyNeoX(), "use_parallel_residual", 1, "field 'use_parallel_residual' must be true"},
      {TinyNeoX(),
       "rope_scaling",
       {{"type", "linear"}, {"factor", 2.0}},
       "field 'rope_scaling' is {\"factor\":2.0,\"type\":\"linear\"}; rotary scaling"},
      {TinyNeoX(), "rotary_pct", 0.375, "field 'rotary_pct' (0.375) gives 3 rotary dimensions"},
      {TinyNeoX(), "rotary_pct", 0.1, "field 'rotary_pct' (0.1) gives 0 rotary dimensions"},
      {TinyNeoX(), "rotary_emb_base", -1, "field 'rotary_emb_base' must be a positive number"},
      {TinyLlama(), "num_attention_heads", 3,
       "field 'hidden_size' (16) is not a multiple of num_attention_heads (3)"},
      {TinyLlama(), "num_key_value_heads", 3,
       "field 'num_key_value_heads' (3) does not divide num_attention_heads (4)"},
      {TinyLlama(), "head_dim", 5, "field 'head_dim': the rotary embedding needs an even"},
      {TinyLlama(),
       "rope_scaling",
       {{"rope_type", "yarn"}, {"factor", 2.0}},
       "field 'rope_scaling' has rope type 'yarn', which is not supported"},
      {TinyLlama(),
       "rope_scaling",
       {{"rope_type", "llama3"}, {"factor", 2.0}},
       "field 'rope_scaling' needs a positive number 'low_freq_factor'"},
      {TinyLlama(), "rope_scaling", "linear", "field 'rope_scaling' must be an object or null"},
      {TinyLlama(/*olmo2=*/true), "rms_norm_eps", "1e-6",
       "field 'rms_norm_eps' must be a positive number"},
      // The family then comes from architectures (the fuzzer's find: this used to throw).
      {TinyLlama(), "model_type", 10000.0, "field 'model_type' must be a string"},
      {TinyLlama(), "use_sliding_window", "yes", "field 'use_sliding_window' must be"},
  };
  for (const Case& c : cases) {
    TinyCheckpoint tiny = c.tiny;
    tiny.config[c.field] = c.value;
    EXPECT_TRUE(
        StatusIs(CreateStatus(tiny), StatusCode::kInvalidArgument, "config.json", c.message))
        << c.field;
  }
}

TEST(ModelErrorsTest, MissingLlamaTensorsAreNamed) {
  TinyCheckpoint olmo2 = TinyLlama(/*olmo2=*/true);
  olmo2.tensors.erase("model.layers.1.self_attn.k_norm.weight");
  EXPECT_TRUE(StatusIs(CreateStatus(olmo2), StatusCode::kInvalidArgument,
                       "tensor 'layers.1.self_attn.k_norm.weight' is missing"));
  TinyCheckpoint llama = TinyLlama();
  llama.tensors["model.layers.0.self_attn.k_proj.weight"] = RandomWeight({16, 16});
  EXPECT_TRUE(StatusIs(CreateStatus(llama), StatusCode::kInvalidArgument,
                       "model.layers.0.self_attn.k_proj.weight", "expected [8, 16]"));
}

TEST(ModelErrorsTest, MissingConfigFieldIsNamed) {
  TinyCheckpoint tiny = TinyGPT2();
  tiny.config.erase("n_positions");
  EXPECT_TRUE(StatusIs(CreateStatus(tiny), StatusCode::kInvalidArgument,
                       "config.json: field 'n_positions' is missing"));
}


TEST(ModelErrorsTest, ConfigNumbersOutOfRangeAreRefusedNamingTheField) {
  // The finding: head_dim 2^27 built a 1 GiB rotary table before any weight was read.
  const std::pair<TinyCheckpoint, std::string> cases[] = {{TinyLlama(), "head_dim"},
                                                          {TinyLlama(), "num_hidden_layers"},
                                                          {TinyLlama(), "intermediate_size"},
                                                          {TinyLlama(/*olmo2=*/true), "head_dim"},
                                                          {TinyGPT2(), "n_layer"},
                                                          {TinyNeoX(), "num_attention_heads"},
                                                          {TinyNeoX(), "vocab_size"}};
  for (const auto& [tiny, field] : cases) {
    for (const int64_t value : {int64_t{1} << 27, int64_t{1} << 34, int64_t{1} << 62}) {
      TinyCheckpoint copy = tiny;
      copy.config[field] = value;
      const uint64_t before = PeakResidentBytes();
      EXPECT_TRUE(StatusIs(CreateStatus(copy), StatusCode::kInvalidArgument,
                           "config.json: field '" + field +
                               "' must be a positive integer of at most 16777216, got " +
                               std::to_string(value)));
      EXPECT_LT(PeakResidentBytes() - before, uint64_t{16} << 20) << field << " " << value;
    }
  }
}

TEST(ModelErrorsTest, AHeadDimInRangeIsCheckedAgainstTheWeightsBeforeTheRotaryTable) {
  // 2^24: a rotary table of 2^23 doubles (64 MiB) if it were built from the config alone.
  for (const bool olmo2 : {false, true}) {
    TinyCheckpoint tiny = TinyLlama(olmo2);
    tiny.config["head_dim"] = int64_t{1} << 24;
    const uint64_t before = PeakResidentBytes();
    EXPECT_TRUE(StatusIs(CreateStatus(tiny), StatusCode::kInvalidArgument, "expected [67108864",
                         "config.json"));
    EXPECT_LT(PeakResidentBytes() - before, uint64_t{16} << 20);
  }
}

TEST(ModelErrorsTest, ConfigErrorsQuoteNoTextOfTheFile) {
  TinyCheckpoint tiny = TinyLlama();
  tiny.config["hidden_size"] = std::string(100000, 'x');
  const absl::Status status = CreateStatus(tiny);
  EXPECT_TRUE(StatusIs(status, StatusCode::kInvalidArgument,
                       "field 'hidden_size' must be a positive integer", "got a JSON string"));
  EXPECT_EQ(status.message().find("xxxx"), std::string::npos);
}

}  // namespace
}  // namespace anisoscope::analysis
