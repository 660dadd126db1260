#include "analysis/models/model_layers.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

// A weight (or an undefined bias) in `dtype`; no copy when it already is.
at::Tensor InDtype(const at::Tensor& weight, at::ScalarType dtype) {
  return weight.defined() ? weight.to(dtype) : weight;
}

// Whether a projection of `x` goes through oneDNN's inner product: float32 on the CPU when
// the LibTorch has oneDNN. at::linear there runs on the BLAS LibTorch was built with
// (Debian's OpenBLAS 0.3.21 drives AVX-512 CPUs with its AVX2 kernels); oneDNN, linked in
// the same LibTorch, reached 1.8-2.7x its rate on BERT-base's projections (2 cores, Zen 5).
bool OnOneDnn(const at::Tensor& x) {
  static const bool linked = at::hasMKLDNN();
  return linked && x.device().is_cpu() && x.scalar_type() == at::kFloat;
}

}  // namespace

absl::StatusOr<Activation> ReadActivation(const ConfigReader& reader, const std::string& field,
                                          const std::string& default_name) {
  ASSIGN_OR_RETURN(const std::string name, reader.String(field, default_name));
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new") return Activation::kGeluNew;
  if (name == "gelu_fast") return Activation::kGeluFast;
  if (name == "gelu_pytorch_tanh") return Activation::kGeluPytorchTanh;
  if (name == "relu") return Activation::kRelu;
  if (name == "silu" || name == "swish") return Activation::kSilu;
  return absl::InvalidArgumentError(absl::StrCat(
      reader.Describe(field), " '", name,
      "' is not supported (gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, relu, silu, swish)"));
}

absl::StatusOr<EmbeddingWeights> LoadEmbedding(const WeightLookup& weights, const std::string& name,
                                               int64_t rows, int64_t dim) {
  EmbeddingWeights result;
  ASSIGN_OR_RETURN(result.weight, weights.Get(name + ".weight", {rows, dim}));
  result.dtype = weights.compute_dtype();
  return result;
}

absl::StatusOr<LinearWeights> LoadLinear(const WeightLookup& weights, const std::string& name,
                                         int64_t out, int64_t in, bool with_bias) {
  LinearWeights result;
  ASSIGN_OR_RETURN(result.weight, weights.Get(name + ".weight", {out, in}));
  if (with_bias) {
    ASSIGN_OR_RETURN(result.bias, weights.Get(name + ".bias", {out}));
  }
  return result;
}

absl::StatusOr<LinearWeights> LoadConv1D(const WeightLookup& weights, const std::string& name,
                                         int64_t in, int64_t out) {
  LinearWeights result;
  ASSIGN_OR_RETURN(const at::Tensor input_major, weights.Get(name + ".weight", {in, out}));
  // A transposed view, not a copy: at::linear multiplies by weight.t(), which is the stored
  // input-major matrix itself, so the weights are used in place.
  result.weight = input_major.t();
  ASSIGN_OR_RETURN(result.bias, weights.Get(name + ".bias", {out}));
  return result;
}

absl::StatusOr<LayerNormWeights> LoadLayerNorm(const WeightLookup& weights, const std::string& name,
                                               int64_t dim) {
  LayerNormWeights result;
  ASSIGN_OR_RETURN(result.weight, weights.Get(name + ".weight", {dim}));
  ASSIGN_OR_RETURN(result.bias, weights.Get(name + ".bias", {dim}));
  return result;
}

at::Tensor EmbeddingRows(const EmbeddingWeights& table, const at::Tensor& ids) {
  return at::embedding(table.weight, ids).to(table.dtype);
}

at::Tensor Linear(at::Tensor x, const LinearWeights& linear) {
  const at::ScalarType dtype = x.scalar_type();
  const at::Tensor weight = InDtype(linear.weight, dtype);
  const at::Tensor bias = InDtype(linear.bias, dtype);
  if (!OnOneDnn(x)) return at::linear(x, weight, bias);
  const at::Tensor input = x.to_mkldnn();
  x.reset();
  return at::mkldnn_linear(input, weight, bias).to_dense();
}

at::Tensor LayerNorm(const at::Tensor& x, const LayerNormWeights& norm, double eps) {
  const at::ScalarType dtype = x.scalar_type();
  return at::layer_norm(x, {norm.weight.size(0)}, InDtype(norm.weight, dtype),
                        InDtype(norm.bias, dtype), eps);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor normalized = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normalized.to(x.scalar_type()) * InDtype(weight, x.scalar_type());
}

at::Tensor Activate(at::Tensor x, Activation activation) {
  switch (activation) {
    case Activation::kGeluNew:  // HF's 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), fused
    case Activation::kGeluPytorchTanh:
      return at::gelu_(x, "tanh");
    case Activation::kGeluFast:
      return 0.5 * x * (1.0 + at::tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)));
    case Activation::kRelu:
      return at::relu_(x);
    case Activation::kSilu:
      return at::silu_(x);
    case Activation::kGelu:
      break;
  }
  return at::gelu_(x);  // exact erf GELU, as HF "gelu"
}

RotaryTables MakeRotaryTables(const at::Tensor& inv_freq, int64_t length, at::ScalarType dtype) {
  const at::Tensor positions = at::arange(length, inv_freq.options());
  const at::Tensor freqs = at::outer(positions, inv_freq);
  const at::Tensor angles = at::cat({freqs, freqs}, -1);
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& tables) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
  return x * tables.cos + rotated * tables.sin;
}

at::Tensor SplitHeads(const at::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

at::Tensor MergeHeads(const at::Tensor& x) {
  return x.permute({0, 2, 1, 3}).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

at::Tensor PaddingKeyMask(const at::Tensor& valid) {
  return valid.view({valid.size(0), 1, 1, valid.size(1)});
}

at::Tensor CausalKeyMask(const at::Tensor& valid) {
  const int64_t length = valid.size(1);
  const at::Tensor causal =
      at::ones({length, length}, valid.options().dtype(at::kBool)).tril();  // [i, j]: j <= i
  return at::logical_and(PaddingKeyMask(valid), causal);
}

at::Tensor AttentionScores(const at::Tensor& query, const at::Tensor& key) {
  return at::matmul(query.contiguous(), key.contiguous().transpose(-1, -2));
}

at::Tensor MaskedSoftmax(at::Tensor scores, const at::Tensor& allowed) {
  scores.masked_fill_(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  return at::softmax(scores, -1);
}

}  // namespace anisoscope::analysis
