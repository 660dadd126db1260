// Family-specific conventions, checked against formulas written out in the test (float64):
// GPT-NeoX's fused per-head [q | k | v] projection, HF rotate_half rotary embedding and
// residual variants; GPT-2's input-major Conv1D c_attn and its attention scaling options;
// LLaMA's grouped-query heads and llama3-scaled rotary; OLMo-2's norms over the whole
// query and key projections.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/analysis/models/tiny_checkpoint.h"

namespace anisoscope::analysis {
namespace {

using at::indexing::Slice;

at::Tensor D(const at::Tensor& t) { return t.to(at::kDouble); }

at::Tensor LayerNorm64(const at::Tensor& x, const TinyCheckpoint& tiny, const std::string& name) {
  const at::Tensor x64 = D(x);
  const at::Tensor centered = x64 - x64.mean(-1, true);
  const at::Tensor var = centered.pow(2).mean(-1, true);
  return centered / (var + 1e-5).sqrt() * D(tiny.tensors.at(name + ".weight")) +
         D(tiny.tensors.at(name + ".bias"));
}

// Causal softmax(q k^T * scale) of one unpadded sample, [1, H, T, T].
at::Tensor CausalProbs64(const at::Tensor& q, const at::Tensor& k, double scale) {
  const int64_t length = q.size(2);
  at::Tensor scores = at::matmul(D(q), D(k).transpose(-1, -2)) * scale;
  scores.masked_fill_(at::ones({length, length}, at::kBool).tril().logical_not(), -INFINITY);
  return at::softmax(scores, -1);
}

const std::vector<int64_t> kIds = {3, 7, 1, 9, 4, 4, 0};

TEST(GPTNeoXForwardTest, FusedProjectionIsLaidOutPerHeadAsQKV) {
  const TinyCheckpoint tiny = TinyNeoX();
  const auto model = LoadModel(tiny);
  ASSERT_NE(model, nullptr);
  const RecordingObserver out = RunForward(*model, MakeBatch({kIds}));
  const at::Tensor ids = at::tensor(kIds, at::kLong);
  const at::Tensor embedded = D(tiny.tensors.at("gpt_neox.embed_in.weight")).index({ids});
  EXPECT_TRUE(Close(out.hidden.at(0)[0], embedded));
  const std::string p = "gpt_neox.layers.0.";
  const at::Tensor fused =  // [T, 3d]
      at::linear(LayerNorm64(embedded, tiny, p + "input_layernorm"),
                 D(tiny.tensors.at(p + "attention.query_key_value.weight")),
                 D(tiny.tensors.at(p + "attention.query_key_value.bias")));
  for (int64_t h = 0; h < 2; ++h) {
    const at::Tensor q = fused.index({Slice(), Slice(h * 24, h * 24 + 8)});
    const at::Tensor k = fused.index({Slice(), Slice(h * 24 + 8, h * 24 + 16)});
    EXPECT_TRUE(Close(out.query_pre_rotary.at(0)[0][h], q, 1e-5)) << h;
    EXPECT_TRUE(Close(out.key_pre_rotary.at(0)[0][h], k, 1e-5)) << h;
  }
}

TEST(GPTNeoXForwardTest, RotaryRotatesOnlyTheFirstRotaryDimsByHfAngles) {
  const auto model = LoadModel(TinyNeoX());  // head_dim 8, rotary_pct 0.5: 4 rotated dims
  ASSERT_NE(model, nullptr);
  const RecordingObserver out = RunForward(*model, MakeBatch({kIds}));
  for (int layer = 0; layer < 2; ++layer) {
    for (const auto& [pre, post] : {std::pair{out.query_pre_rotary.at(layer), out.query.at(layer)},
                                    std::pair{out.key_pre_rotary.at(layer), out.key.at(layer)}}) {
      EXPECT_TRUE(at::equal(pre.index({"...", Slice(4, 8)}), post.index({"...", Slice(4, 8)})));
      EXPECT_TRUE(at::equal(pre.index({"...", 0, Slice()}), post.index({"...", 0, Slice()})));
      // rotate_half pairs dim j with j + 2, angle t / 10000^(2j/4).
      const at::Tensor x = D(pre);
      at::Tensor expected = x.clone();
      for (int64_t t = 0; t < static_cast<int64_t>(kIds.size()); ++t) {
        for (int64_t j = 0; j < 2; ++j) {
          const double theta = t / std::pow(10000.0, 2.0 * j / 4.0);
          const at::Tensor a = x.index({"...", t, j}), b = x.index({"...", t, j + 2});
          expected.index_put_({"...", t, j}, a * std::cos(theta) - b * std::sin(theta));
          expected.index_put_({"...", t, j + 2}, b * std::cos(theta) + a * std::sin(theta));
        }
      }
      EXPECT_TRUE(Close(post, expected, 1e-5)) << layer;
    }
    EXPECT_TRUE(Close(out.probs.at(layer),
                      CausalProbs64(out.query.at(layer), out.key.at(layer), 1 / std::sqrt(8.0)),
                      1e-5));
  }
}

TEST(GPTNeoXForwardTest, ParallelAndSequentialResidualDiffer) {
  TinyCheckpoint sequential = TinyNeoX();
  sequential.config["use_parallel_residual"] = false;
  const auto a = LoadModel(TinyNeoX(), "_parallel");
  const auto b = LoadModel(sequential, "_sequential");
  ASSERT_NE(b, nullptr);
  const RecordingObserver pa = RunForward(*a, MakeBatch({kIds}));
  const RecordingObserver pb = RunForward(*b, MakeBatch({kIds}));
  EXPECT_TRUE(at::equal(pa.query.at(0), pb.query.at(0)));  // same input to block 0
  EXPECT_FALSE(Close(pa.hidden.at(1), pb.hidden.at(1), 1e-3));
  EXPECT_FALSE(Close(pa.query.at(1), pb.query.at(1), 1e-3));
}

TEST(GPTNeoXForwardTest, RopeThetaIsTheBaseAndChangesTheRotation) {
  TinyCheckpoint theta = TinyNeoX(), base = TinyNeoX();
  theta.config["rope_theta"] = 100.0;
  base.config["rotary_emb_base"] = 100;
  const RecordingObserver a = RunForward(*LoadModel(theta, "_theta"), MakeBatch({kIds}));
  const RecordingObserver b = RunForward(*LoadModel(base, "_base"), MakeBatch({kIds}));
  const RecordingObserver c = RunForward(*LoadModel(TinyNeoX(), "_default"), MakeBatch({kIds}));
  EXPECT_TRUE(at::equal(a.query.at(0), b.query.at(0)));
  EXPECT_FALSE(Close(a.query.at(0), c.query.at(0), 1e-4));
}

TEST(GPTNeoXForwardTest, AttentionBiasFalseNeedsNoBiasTensors) {
  TinyCheckpoint tiny = TinyNeoX();
  tiny.config["attention_bias"] = false;
  for (int l = 0; l < 2; ++l) {
    tiny.tensors.erase(absl::StrCat("gpt_neox.layers.", l, ".attention.query_key_value.bias"));
    tiny.tensors.erase(absl::StrCat("gpt_neox.layers.", l, ".attention.dense.bias"));
  }
  EXPECT_NE(LoadModel(tiny), nullptr);
}

TEST(GPT2ForwardTest, CAttnIsInputMajorWithColumnsQKV) {
  TinyCheckpoint tiny = TinyGPT2();
  tiny.tensors["lm_head.weight"] = at::zeros({50, 16});  // tied head stored: ignored
  const auto model = LoadModel(tiny);
  ASSERT_NE(model, nullptr);
  const RecordingObserver out = RunForward(*model, MakeBatch({kIds}));
  const at::Tensor ids = at::tensor(kIds, at::kLong);
  const at::Tensor embedded = D(tiny.tensors.at("transformer.wte.weight")).index({ids}) +
                              D(tiny.tensors.at("transformer.wpe.weight")).index({Slice(0, 7)});
  EXPECT_TRUE(Close(out.hidden.at(0)[0], embedded, 1e-6));
  const at::Tensor qkv = at::matmul(LayerNorm64(embedded, tiny, "transformer.h.0.ln_1"),
                                    D(tiny.tensors.at("transformer.h.0.attn.c_attn.weight"))) +
                         D(tiny.tensors.at("transformer.h.0.attn.c_attn.bias"));  // [T, 3d]
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_TRUE(Close(out.query.at(0)[0][h], qkv.index({Slice(), Slice(h * 8, h * 8 + 8)}), 1e-5));
    EXPECT_TRUE(
        Close(out.key.at(0)[0][h], qkv.index({Slice(), Slice(16 + h * 8, 24 + h * 8)}), 1e-5));
  }
}

TEST(GPT2ForwardTest, AttentionScalingOptionsFollowTheConfig) {
  struct Case {
    bool scale_weights, inverse_layer, reorder;
  };
  for (const Case c : {Case{true, false, false}, Case{true, true, false}, Case{false, true, false},
                       Case{true, true, true}, Case{false, false, true}}) {
    TinyCheckpoint tiny = TinyGPT2();
    tiny.config["scale_attn_weights"] = c.scale_weights;
    tiny.config["scale_attn_by_inverse_layer_idx"] = c.inverse_layer;
    tiny.config["reorder_and_upcast_attn"] = c.reorder;
    const auto model = LoadModel(tiny);
    ASSERT_NE(model, nullptr);
    const RecordingObserver out = RunForward(*model, MakeBatch({kIds}));
    for (int layer = 0; layer < 2; ++layer) {
      double scale = c.scale_weights ? 1 / std::sqrt(8.0) : 1.0;
      if (c.inverse_layer) scale /= layer + 1;
      EXPECT_TRUE(Close(out.probs.at(layer),
                        CausalProbs64(out.query.at(layer), out.key.at(layer), scale), 1e-5))
          << c.scale_weights << c.inverse_layer << c.reorder << " layer " << layer;
    }
  }
}

at::Tensor RmsNorm64(const at::Tensor& x, const at::Tensor& weight) {
  const at::Tensor x64 = D(x);
  return x64 / (x64.pow(2).mean(-1, true) + 1e-6).sqrt() * D(weight);
}

// [1, T, H * d_h] -> [1, H, T, d_h]
at::Tensor Heads(const at::Tensor& x, int64_t heads) {
  return x.view({1, x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

TEST(LlamaForwardTest, QueryHeadsShareTheirKeyHead) {
  const TinyCheckpoint tiny = TinyLlama();
  const auto model = LoadModel(tiny);
  ASSERT_NE(model, nullptr);
  const RecordingObserver out = RunForward(*model, MakeBatch({kIds}));
  // Block 0's input is the embedding; key head j (k_proj rows 4j … 4j+3) serves query heads
  // 2j and 2j + 1.
  const at::Tensor x =
      RmsNorm64(out.hidden.at(0), tiny.tensors.at("model.layers.0.input_layernorm.weight"));
  const at::Tensor keys =
      Heads(at::matmul(x, D(tiny.tensors.at("model.layers.0.self_attn.k_proj.weight")).t()), 2);
  const at::Tensor queries =
      Heads(at::matmul(x, D(tiny.tensors.at("model.layers.0.self_attn.q_proj.weight")).t()), 4);
  ASSERT_EQ(out.key_pre_rotary.at(0).size(1), 4);
  for (int64_t head = 0; head < 4; ++head) {
    EXPECT_TRUE(Close(out.key_pre_rotary.at(0).select(1, head), keys.select(1, head / 2), 1e-4))
        << head;
    EXPECT_TRUE(Close(out.key.at(0).select(1, head), out.key.at(0).select(1, head / 2 * 2)));
  }
  EXPECT_TRUE(Close(out.query_pre_rotary.at(0), queries, 1e-4));
}

TEST(LlamaForwardTest, RotaryUsesLlama3ScaledFrequenciesOverTheWholeHead) {
  const TinyCheckpoint tiny = TinyLlama();
  const auto model = LoadModel(tiny);
  ASSERT_NE(model, nullptr);
  const RecordingObserver out = RunForward(*model, MakeBatch({kIds}));
  // d_h 4: base frequencies 1 and 1/100, wavelengths 2π and 200π; original context 16,
  // low_freq_factor 1, high 4, factor 4: 200π > 16/1 is divided by 4; 16/4 <= 2π <= 16 is
  // interpolated with smooth = (16 / 2π − 1) / (4 − 1).
  const double smooth = (16 / (2 * M_PI) - 1) / 3;
  const std::vector<double> inv_freq = {(1 - smooth) / 4 + smooth, 0.01 / 4};
  const int64_t length = static_cast<int64_t>(kIds.size());
  const at::Tensor positions = at::arange(length, at::kDouble);
  const at::Tensor freqs = at::outer(positions, at::tensor(inv_freq, at::kDouble));
  const at::Tensor angles = at::cat({freqs, freqs}, -1);  // [T, 4]
  for (const auto* pair : {&out.query_pre_rotary, &out.key_pre_rotary}) {
    const at::Tensor pre = D(pair->at(1));
    const at::Tensor half = at::cat({pre.narrow(-1, 2, 2).neg(), pre.narrow(-1, 0, 2)}, -1);
    const at::Tensor expected = pre * angles.cos() + half * angles.sin();
    const at::Tensor& post = pair == &out.query_pre_rotary ? out.query.at(1) : out.key.at(1);
    EXPECT_TRUE(Close(post, expected, 1e-5));
  }
}

TEST(Olmo2ForwardTest, QueryAndKeyNormsCoverTheWholeProjectionBeforeTheRotary) {
  const TinyCheckpoint tiny = TinyLlama(/*olmo2=*/true);
  const auto model = LoadModel(tiny);
  ASSERT_NE(model, nullptr);
  const RecordingObserver out = RunForward(*model, MakeBatch({kIds}));
  const at::Tensor x = D(out.hidden.at(0));  // OLMo-2 has no input norm
  const std::string p = "model.layers.0.self_attn.";
  const at::Tensor q = RmsNorm64(at::matmul(x, D(tiny.tensors.at(p + "q_proj.weight")).t()),
                                 tiny.tensors.at(p + "q_norm.weight"));
  const at::Tensor k = RmsNorm64(at::matmul(x, D(tiny.tensors.at(p + "k_proj.weight")).t()),
                                 tiny.tensors.at(p + "k_norm.weight"));
  EXPECT_TRUE(Close(out.query_pre_rotary.at(0), Heads(q, 4), 1e-4));
  EXPECT_TRUE(Close(out.key_pre_rotary.at(0).select(1, 3), Heads(k, 2).select(1, 1), 1e-4));
}

}  // namespace
}  // namespace anisoscope::analysis
