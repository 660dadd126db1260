// Forward behaviour of the causal families (gpt_neox, gpt2, llama, olmo2) on tiny random
// checkpoints:
// causality, masking, the rotary embedding, residual variants, fp16 storage, the HF
// hidden-state convention and the fused projections' layouts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/transformer_model.h"
#include "tests/analysis/models/tiny_checkpoint.h"

namespace anisoscope::analysis {
namespace {

using at::indexing::Slice;

class CausalForwardTest : public ::testing::TestWithParam<std::string> {
 protected:
  TinyCheckpoint Tiny() const {
    if (GetParam() == "gpt_neox") return TinyNeoX();
    if (GetParam() == "gpt2") return TinyGPT2();
    return TinyLlama(/*olmo2=*/GetParam() == "olmo2");
  }
  bool RmsNormed() const { return GetParam() == "llama" || GetParam() == "olmo2"; }
};

TEST_P(CausalForwardTest, ChangingALaterTokenLeavesEarlierPositionsUnchanged) {
  const auto model = LoadModel(Tiny());
  ASSERT_NE(model, nullptr);
  const RecordingObserver a = RunForward(*model, MakeBatch({{3, 7, 1, 9, 4}}));
  const RecordingObserver b = RunForward(*model, MakeBatch({{3, 7, 1, 9, 11}}));
  const auto early = Slice(0, 4);
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_TRUE(Close(a.query.at(layer).index({"...", early, Slice()}),
                      b.query.at(layer).index({"...", early, Slice()})));
    EXPECT_TRUE(Close(a.key.at(layer).index({"...", early, Slice()}),
                      b.key.at(layer).index({"...", early, Slice()})));
    EXPECT_TRUE(Close(a.probs.at(layer).index({"...", early, Slice()}),
                      b.probs.at(layer).index({"...", early, Slice()})));
    EXPECT_FALSE(Close(a.key.at(layer).index({"...", 4, Slice()}),
                       b.key.at(layer).index({"...", 4, Slice()})));
  }
  for (int index = 0; index <= 2; ++index) {
    EXPECT_TRUE(Close(a.hidden.at(index).index({Slice(), early}),
                      b.hidden.at(index).index({Slice(), early})));
  }
}

TEST_P(CausalForwardTest, ProbsSumToOneOverAllowedKeysAndAreZeroElsewhere) {
  const auto model = LoadModel(Tiny());
  ASSERT_NE(model, nullptr);
  const Batch2D batch = MakeBatch({{1, 2, 3, 4, 5, 6}, {7, 8, 9}});
  const RecordingObserver out = RunForward(*model, batch);
  const at::Tensor causal = at::ones({6, 6}, at::kBool).tril();
  const at::Tensor allowed = batch.valid.view({2, 1, 1, 6}).logical_and(causal);  // [B,1,T,T]
  const int64_t heads = model->shape().num_heads;
  for (int layer = 0; layer < 2; ++layer) {
    const at::Tensor probs = out.probs.at(layer);
    ASSERT_EQ(probs.sizes(), at::IntArrayRef({2, heads, 6, 6}));
    EXPECT_EQ(probs.masked_select(allowed.logical_not().expand_as(probs)).abs().max().item<float>(),
              0.0f);
    EXPECT_TRUE(Close(probs.sum(-1), at::ones({2, heads, 6}), 1e-5));
    EXPECT_GT(probs.masked_select(allowed.expand_as(probs)).min().item<float>(), 0.0f);
  }
}

TEST_P(CausalForwardTest, RightPaddingLeavesValidPositionsUnchanged) {
  const auto model = LoadModel(Tiny());
  ASSERT_NE(model, nullptr);
  const RecordingObserver alone = RunForward(*model, MakeBatch({{7, 8, 9}}));
  const RecordingObserver padded = RunForward(*model, MakeBatch({{1, 2, 3, 4, 5, 6}, {7, 8, 9}}));
  const auto valid = Slice(0, 3);
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_TRUE(Close(alone.query.at(layer)[0], padded.query.at(layer)[1].index({Slice(), valid})));
    EXPECT_TRUE(
        Close(alone.probs.at(layer)[0], padded.probs.at(layer)[1].index({Slice(), valid, valid})));
  }
  EXPECT_TRUE(Close(alone.hidden.at(2)[0], padded.hidden.at(2)[1].index({valid})));
}

TEST_P(CausalForwardTest, LastHiddenStateIsAfterTheFinalLayerNorm) {
  TinyCheckpoint tiny = Tiny();
  const std::string norm = GetParam() == "gpt_neox" ? "gpt_neox.final_layer_norm"
                           : GetParam() == "gpt2"   ? "transformer.ln_f"
                                                    : "model.norm";
  tiny.tensors[norm + ".weight"] = at::ones({16});
  if (!RmsNormed()) tiny.tensors[norm + ".bias"] = at::zeros({16});
  const auto model = LoadModel(tiny);
  ASSERT_NE(model, nullptr);
  const RecordingObserver out = RunForward(*model, MakeBatch({{3, 7, 1, 9, 4}}));
  ASSERT_EQ(out.hidden.size(), 3u);  // L + 1
  const at::Tensor last = out.hidden.at(2).to(at::kDouble);
  if (RmsNormed()) {  // RMSNorm: unit mean square, the mean left as it is
    EXPECT_TRUE(Close(last.pow(2).mean(-1), at::ones({1, 5}), 1e-3));
    EXPECT_FALSE(Close(out.hidden.at(1).to(at::kDouble).pow(2).mean(-1), at::ones({1, 5}), 1e-3));
    return;
  }
  EXPECT_TRUE(Close(last.mean(-1), at::zeros({1, 5}), 1e-5));
  EXPECT_TRUE(Close(last.var(-1, /*unbiased=*/false), at::ones({1, 5}), 1e-3));
  EXPECT_FALSE(Close(out.hidden.at(1).to(at::kDouble).mean(-1), at::zeros({1, 5}), 1e-3));
}

TEST_P(CausalForwardTest, Float16WeightsAreUpcastToTheComputeDtype) {
  TinyCheckpoint rounded = Tiny();
  for (auto& [name, tensor] : rounded.tensors) tensor = tensor.to(at::kHalf).to(at::kFloat);
  const auto from_half = LoadModel(rounded, "_f16", at::kHalf);
  const auto from_float = LoadModel(rounded, "_f32", at::kFloat);
  ASSERT_NE(from_half, nullptr);
  ASSERT_NE(from_float, nullptr);
  const Batch2D batch = MakeBatch({{3, 7, 1, 9, 4}, {2, 2}});
  const RecordingObserver a = RunForward(*from_half, batch);
  const RecordingObserver b = RunForward(*from_float, batch);
  EXPECT_EQ(a.query.at(1).scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(a.query.at(1), b.query.at(1)));
  EXPECT_TRUE(at::equal(a.hidden.at(2), b.hidden.at(2)));
}

TEST_P(CausalForwardTest, Bfloat16ComputeStaysCloseToFloat32) {
  const auto f32 = LoadModel(Tiny(), "_f32");
  const auto bf16 = LoadModel(Tiny(), "_bf16", at::kFloat, {"cpu", "bfloat16"});
  ASSERT_NE(bf16, nullptr);
  const Batch2D batch = MakeBatch({{3, 7, 1, 9, 4}, {2, 2}});
  const RecordingObserver a = RunForward(*f32, batch);
  const RecordingObserver b = RunForward(*bf16, batch);
  EXPECT_EQ(b.probs.at(1).scalar_type(), at::kBFloat16);
  EXPECT_TRUE(Close(a.probs.at(1), b.probs.at(1), 5e-2));
}

INSTANTIATE_TEST_SUITE_P(Families, CausalForwardTest,
                         ::testing::Values("gpt_neox", "gpt2", "llama", "olmo2"));

}  // namespace
}  // namespace anisoscope::analysis
