// Helpers shared by the model and metrics tests: tiny random GPT-NeoX / GPT-2 / LLaMA /
// OLMo-2 checkpoints
// in Hugging Face naming, written as config.json + model.safetensors, and an observer that
// records everything a forward reports.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/transformer_model.h"
#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {

// Writes `tensors` (float32/float16/bfloat16, any device-less layout) as a safetensors file.
inline void WriteSafetensors(const std::filesystem::path& file,
                             const std::map<std::string, at::Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor t = tensor.contiguous();
    const size_t bytes = t.numel() * t.element_size();
    header[name] = {{"dtype", DtypeName(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {data.size(), data.size() + bytes}}};
    data.append(static_cast<const char*>(t.data_ptr()), bytes);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));  // little endian host
  out << text << data;
}

// A config and a state dict of random float32 weights, in Hugging Face naming.
struct TinyCheckpoint {
  nlohmann::json config;
  std::map<std::string, at::Tensor> tensors;

  // Writes dir/config.json and dir/model.safetensors with every tensor cast to `dtype`.
  std::filesystem::path Write(const std::filesystem::path& dir,
                              at::ScalarType dtype = at::kFloat) const {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump(2);
    std::map<std::string, at::Tensor> cast;
    for (const auto& [name, tensor] : tensors) cast[name] = tensor.to(dtype);
    WriteSafetensors(dir / "model.safetensors", cast);
    return dir;
  }
};

inline at::Tensor RandomWeight(std::vector<int64_t> shape, double scale = 0.3) {
  return at::randn(shape, at::kFloat) * scale;
}
inline void AddLayerNorm(TinyCheckpoint& c, const std::string& name, int64_t d) {
  c.tensors[name + ".weight"] = 1.0 + RandomWeight({d}, 0.1);
  c.tensors[name + ".bias"] = RandomWeight({d}, 0.1);
}
inline void AddLinear(TinyCheckpoint& c, const std::string& name, int64_t out, int64_t in) {
  c.tensors[name + ".weight"] = RandomWeight({out, in});
  c.tensors[name + ".bias"] = RandomWeight({out}, 0.1);
}

// GPTNeoXForCausalLM: d 16, 2 heads of 8, rotary on 4 dims, 2 layers, vocab 50.
inline TinyCheckpoint TinyNeoX(uint64_t seed = 1) {
  at::manual_seed(seed);
  const int64_t d = 16, inner = 32, vocab = 50, layers = 2;
  TinyCheckpoint c;
  c.config = {{"architectures", {"GPTNeoXForCausalLM"}},
              {"model_type", "gpt_neox"},
              {"vocab_size", vocab},
              {"hidden_size", d},
              {"num_hidden_layers", layers},
              {"num_attention_heads", 2},
              {"intermediate_size", inner},
              {"max_position_embeddings", 32},
              {"rotary_pct", 0.5},
              {"rotary_emb_base", 10000},
              {"use_parallel_residual", true},
              {"hidden_act", "gelu"},
              {"layer_norm_eps", 1e-5},
              {"torch_dtype", "float16"}};
  c.tensors["gpt_neox.embed_in.weight"] = RandomWeight({vocab, d}, 1.0);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = absl::StrCat("gpt_neox.layers.", l, ".");
    AddLayerNorm(c, p + "input_layernorm", d);
    AddLayerNorm(c, p + "post_attention_layernorm", d);
    AddLinear(c, p + "attention.query_key_value", 3 * d, d);
    AddLinear(c, p + "attention.dense", d, d);
    AddLinear(c, p + "mlp.dense_h_to_4h", inner, d);
    AddLinear(c, p + "mlp.dense_4h_to_h", d, inner);
    // Buffers HF keeps in the state dict; the model ignores them.
    c.tensors[p + "attention.rotary_emb.inv_freq"] = at::ones({2}, at::kFloat);
    c.tensors[p + "attention.masked_bias"] = at::full({}, -1e9, at::kFloat);
  }
  AddLayerNorm(c, "gpt_neox.final_layer_norm", d);
  c.tensors["embed_out.weight"] = RandomWeight({vocab, d});
  return c;
}

// GPT2LMHeadModel: d 16, 2 heads of 8, 2 layers, vocab 50, n_inner null (64).
inline TinyCheckpoint TinyGPT2(uint64_t seed = 2) {
  at::manual_seed(seed);
  const int64_t d = 16, inner = 64, vocab = 50, layers = 2, positions = 32;
  TinyCheckpoint c;
  c.config = {{"architectures", {"GPT2LMHeadModel"}},
              {"model_type", "gpt2"},
              {"vocab_size", vocab},
              {"n_embd", d},
              {"n_layer", layers},
              {"n_head", 2},
              {"n_positions", positions},
              {"n_inner", nullptr},
              {"activation_function", "gelu_new"},
              {"layer_norm_epsilon", 1e-5},
              {"scale_attn_weights", true},
              {"scale_attn_by_inverse_layer_idx", false},
              {"reorder_and_upcast_attn", false}};
  c.tensors["transformer.wte.weight"] = RandomWeight({vocab, d}, 1.0);
  c.tensors["transformer.wpe.weight"] = RandomWeight({positions, d}, 0.5);
  auto conv1d = [&](const std::string& name, int64_t in, int64_t out) {
    c.tensors[name + ".weight"] = RandomWeight({in, out});
    c.tensors[name + ".bias"] = RandomWeight({out}, 0.1);
  };
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = absl::StrCat("transformer.h.", l, ".");
    AddLayerNorm(c, p + "ln_1", d);
    conv1d(p + "attn.c_attn", d, 3 * d);
    conv1d(p + "attn.c_proj", d, d);
    AddLayerNorm(c, p + "ln_2", d);
    conv1d(p + "mlp.c_fc", d, inner);
    conv1d(p + "mlp.c_proj", inner, d);
    c.tensors[p + "attn.bias"] = at::ones({1, 1, positions, positions}, at::kFloat).tril();
  }
  AddLayerNorm(c, "transformer.ln_f", d);
  return c;
}

// LlamaForCausalLM (or Olmo2ForCausalLM): d 16, 4 query heads of 4 sharing 2 key heads,
// 2 layers, vocab 50, tied embeddings, llama3 rope scaling (llama).
inline TinyCheckpoint TinyLlama(bool olmo2 = false, uint64_t seed = 3) {
  at::manual_seed(seed);
  const int64_t d = 16, inner = 24, vocab = 50, layers = 2, heads = 4, kv_heads = 2, dh = 4;
  TinyCheckpoint c;
  c.config = {{"architectures", {olmo2 ? "Olmo2ForCausalLM" : "LlamaForCausalLM"}},
              {"model_type", olmo2 ? "olmo2" : "llama"},
              {"vocab_size", vocab},
              {"hidden_size", d},
              {"num_hidden_layers", layers},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv_heads},
              {"intermediate_size", inner},
              {"max_position_embeddings", 32},
              {"hidden_act", "silu"},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 10000.0},
              {"tie_word_embeddings", !olmo2}};
  if (!olmo2) {
    c.config["rope_scaling"] = {{"rope_type", "llama3"},
                                {"factor", 4.0},
                                {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0},
                                {"original_max_position_embeddings", 16}};
  }
  auto gain = [&](const std::string& name, int64_t size) {
    c.tensors[name + ".weight"] = 1.0 + RandomWeight({size}, 0.1);
  };
  c.tensors["model.embed_tokens.weight"] = RandomWeight({vocab, d}, 1.0);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    if (olmo2) {
      gain(p + "post_attention_layernorm", d);
      gain(p + "post_feedforward_layernorm", d);
      gain(p + "self_attn.q_norm", heads * dh);
      gain(p + "self_attn.k_norm", kv_heads * dh);
    } else {
      gain(p + "input_layernorm", d);
      gain(p + "post_attention_layernorm", d);
    }
    c.tensors[p + "self_attn.q_proj.weight"] = RandomWeight({heads * dh, d});
    c.tensors[p + "self_attn.k_proj.weight"] = RandomWeight({kv_heads * dh, d});
    c.tensors[p + "self_attn.v_proj.weight"] = RandomWeight({kv_heads * dh, d});
    c.tensors[p + "self_attn.o_proj.weight"] = RandomWeight({d, heads * dh});
    c.tensors[p + "mlp.gate_proj.weight"] = RandomWeight({inner, d});
    c.tensors[p + "mlp.up_proj.weight"] = RandomWeight({inner, d});
    c.tensors[p + "mlp.down_proj.weight"] = RandomWeight({d, inner});
  }
  gain("model.norm", d);
  if (olmo2) c.tensors["lm_head.weight"] = RandomWeight({vocab, d});
  return c;
}

// Everything one forward reports, cloned.
struct RecordingObserver : ForwardObserver {
  std::map<int, at::Tensor> hidden, query, key, probs, query_pre_rotary, key_pre_rotary;
  void OnHiddenState(int index, const at::Tensor& h) override { hidden[index] = h.clone(); }
  void OnAttention(int layer, const at::Tensor& q, const at::Tensor& k,
                   const at::Tensor& p) override {
    query[layer] = q.clone();
    key[layer] = k.clone();
    probs[layer] = p.clone();
  }
  void OnPreRotary(int layer, const at::Tensor& q, const at::Tensor& k) override {
    query_pre_rotary[layer] = q.clone();
    key_pre_rotary[layer] = k.clone();
  }
};

// A fresh empty directory under the temp dir named after the running test.
inline std::filesystem::path TestDir(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrCat("anisoscope_", info->test_suite_name(), "_", info->name(), suffix);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Right-padded ids and validity for samples of unequal length.
struct Batch2D {
  at::Tensor ids, valid;
};
inline Batch2D MakeBatch(const std::vector<std::vector<int64_t>>& samples) {
  size_t length = 0;
  for (const auto& s : samples) length = std::max(length, s.size());
  at::Tensor ids =
      at::zeros({static_cast<int64_t>(samples.size()), static_cast<int64_t>(length)}, at::kLong);
  at::Tensor valid = at::zeros_like(ids, at::kBool);
  for (size_t b = 0; b < samples.size(); ++b) {
    for (size_t t = 0; t < samples[b].size(); ++t) {
      ids[b][t] = samples[b][t];
      valid[b][t] = true;
    }
  }
  return {ids, valid};
}

// Writes `tiny` (tensors stored as `stored`) to a fresh test dir and builds its model.
inline std::unique_ptr<TransformerModel> LoadModel(const TinyCheckpoint& tiny,
                                                   const std::string& suffix = "",
                                                   at::ScalarType stored = at::kFloat,
                                                   const ModelOptions& options = {}) {
  auto checkpoint = Checkpoint::Load(tiny.Write(TestDir(suffix), stored), FileGate::Host());
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (!checkpoint.ok()) return nullptr;
  auto model = CreateModel(*checkpoint, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

inline RecordingObserver RunForward(const TransformerModel& model, const Batch2D& batch) {
  c10::InferenceMode guard;
  RecordingObserver observer;
  model.Forward(batch.ids.to(model.device()), batch.valid.to(model.device()), observer);
  return observer;
}

inline bool Close(const at::Tensor& a, const at::Tensor& b, double tol = 1e-6) {
  return at::allclose(a.to(at::kDouble), b.to(at::kDouble), tol, tol);
}

}  // namespace anisoscope::analysis
