#include "analysis/metric_catalog/metric_catalog.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace anisoscope::analysis {
namespace {

// A row of the table below: the field, then what the catalogue says of it.
struct Row {
  MetricInfo info;
  Row&& Group(MetricGroup group) && {
    info.group = group;
    return std::move(*this);
  }
  Row&& Rotary() && {
    info.families = MetricFamilies::kRotary;
    return std::move(*this);
  }
  Row&& TokenSample() && {
    info.token_sample = true;
    return std::move(*this);
  }
  // METRICS.md's definition may be 0/0.
  Row&& MayBeUndefined() && {
    info.may_be_undefined = true;
    return std::move(*this);
  }
  Row&& Baseline(const char* dimension) && {
    info.baseline = dimension;
    return std::move(*this);
  }
};

template <typename Metrics, typename Value>
Row Entry(Value Metrics::*member, const char* name, const char* unit, const char* label,
          const char* definition, const char* meaning) {
  Row row;
  MetricInfo& info = row.info;
  info.name = name;
  if constexpr (std::is_same_v<Metrics, HeadMetrics>) {
    info.scope = MetricScope::kHead;
  } else if constexpr (std::is_same_v<Metrics, HiddenStateMetrics>) {
    info.scope = MetricScope::kHiddenState;
  } else {
    static_assert(std::is_same_v<Metrics, CheckpointMetrics>);
    info.scope = MetricScope::kCheckpoint;
  }
  info.kind = std::is_same_v<Value, double> ? MetricKind::kScalar : MetricKind::kVector;
  info.field = member;
  info.unit = unit;
  info.label = label;
  info.definition = definition;
  info.meaning = meaning;
  return row;
}

// A per-block scalar derived at query time from the stored per-head vectors.
Row Derived(const char* name, const char* unit, const char* label, const char* definition,
            const char* meaning) {
  Row row;
  row.info.name = name;
  row.info.scope = MetricScope::kBlock;
  row.info.derived = true;
  row.info.unit = unit;
  row.info.label = label;
  row.info.definition = definition;
  row.info.meaning = meaning;
  return row;
}

using G = MetricGroup;
using H = HeadMetrics;
using S = HiddenStateMetrics;
using C = CheckpointMetrics;

// THE list (METRICS.md defines each). The order within a scope and kind is the order of
// ForEachScalar, ForEachVector and the name lists.
std::vector<MetricInfo> BuildCatalog() {
  Row rows[] = {
      // ---- Per block l and head h --------------------------------------------------------
      Entry(&H::q_mean_norm, "q_mean_norm", "≥ 0", "query mean norm  ‖Q̄‖",
            "`‖Q̄‖₂`, `Q̄ = mean_t Q[t, h]`",
            "size of the common offset shared by all of the head's queries (the drift Godey "
            "et al. follow)"),
      Entry(&H::k_mean_norm, "k_mean_norm", "≥ 0", "key mean norm  ‖K̄‖",
            "`‖K̄‖₂`, `K̄ = mean_t K[t, h]`", "the same for keys"),
      Entry(&H::qk_mean_dot, "qk_mean_dot", "real", "Q/K mean scalar product  ⟨Q̄, K̄⟩", "`⟨Q̄, K̄⟩`",
            "scalar product of the two common offsets, with its sign"),
      Entry(&H::qk_mean_cosine, "qk_mean_cosine", "[-1, 1]", "Q/K mean cosine  cos(Q̄, K̄)",
            "`⟨Q̄, K̄⟩ / (‖Q̄‖ ‖K̄‖)`",
            "whether the query and key offsets point along the same axis (±1) or are unrelated "
            "(≈ 0), whatever their size")
          .MayBeUndefined()
          .Baseline("head"),
      Entry(&H::attn_entropy, "attn_entropy", "nats, [0, ln n]", "attention entropy (nats)",
            "`H_i = −Σ_j p_ij ln p_ij` (nats, `0 ln 0 = 0`), mean over all valid queries `i` "
            "of the probe",
            "how spread the head's attention is: 0 is one key, `ln n` uniform over `n` keys"),
      Entry(&H::q_anisotropy, "q_anisotropy", "[-1, 1]", "query anisotropy (mean pairwise cosine)",
            "mean pairwise cosine of the head's `N` valid query vectors `Q[t, h]`",
            "≈ 0: queries point in all directions; near 1: they all point one way")
          .MayBeUndefined()
          .Baseline("head"),
      Entry(&H::k_anisotropy, "k_anisotropy", "[-1, 1]", "key anisotropy (mean pairwise cosine)",
            "the same for keys", "the same for keys")
          .MayBeUndefined()
          .Baseline("head"),
      Entry(&H::attn_max_prob, "attn_max_prob", "[0, 1]", "attention max probability  max_j p_ij",
            "mean over valid `i` of `max_j p_ij` (Godey et al. Fig. 9–10)",
            "near 1: each query attends to essentially one key")
          .Group(G::kSharpness),
      Entry(&H::attn_min_prob, "attn_min_prob", "[0, 1]", "attention min probability  min_j p_ij",
            "mean over valid `i` of `min_j p_ij`", "how much the least-attended key still gets")
          .Group(G::kSharpness),
      Entry(&H::attn_median_prob, "attn_median_prob", "[0, 1]",
            "attention median probability  median_j p_ij", "mean over valid `i` of `median_j p_ij`",
            "the typical key weight; compare with `1/n`")
          .Group(G::kSharpness),
      Entry(&H::attn_first_token_mass, "attn_first_token_mass", "[0, 1]",
            "attention on the first token  p_i0",
            "mean over valid `i` of `p_i0`, the weight on the sample's first position",
            "attention sink (Gu et al. 2024): a head with mass > 0.3 is a sink head")
          .Group(G::kSharpness),

      // ---- Per hidden state l = 0 … L ----------------------------------------------------
      Entry(&S::anisotropy, "hidden_anisotropy", "[-1, 1]",
            "hidden-state anisotropy (mean pairwise cosine)",
            "mean pairwise cosine of the `N` vectors",
            "the representation anisotropy of Godey et al. and Machina & Mercer")
          .MayBeUndefined()
          .Baseline("hidden"),
      Entry(&S::mean_norm, "hidden_mean_norm", "≥ 0", "hidden-state mean norm  ‖mean h‖",
            "`‖mean_t x_t‖₂`", "the \"drift\" of the common direction"),
      Entry(&S::sv_skewness, "hidden_sv_skewness", "real", "singular value skewness",
            "population skewness (biased, as `scipy.stats.skew`) of the `σ_i`",
            "large: a few singular values dominate the spectrum")
          .Group(G::kSpectra)
          .MayBeUndefined(),
      Entry(&S::sv_median, "hidden_sv_median", "[0, 1]", "median singular value  σ_i/σ_1",
            "median of `σ_i / σ_1`", "small: most directions are negligible next to the first")
          .Group(G::kSpectra)
          .MayBeUndefined(),
      Entry(&S::ev_1, "hidden_ev_1", "[0, 1]", "explained variance, top direction  EV_1",
            "`EV_1 = σ_1² / Σ_i σ_i²` (Yan et al. eq. 5)",
            "share of the energy in the top direction (uncentered, so a common offset counts)")
          .Group(G::kSpectra)
          .MayBeUndefined(),
      Entry(&S::ev_10, "hidden_ev_10", "[0, 1]", "explained variance, top 10 directions  EV_10",
            "`EV_10 = Σ_{i≤10} σ_i² / Σ_i σ_i²` (Yan et al. eq. 5)",
            "share of the energy in the top 10 directions (uncentered, so a common offset "
            "counts)")
          .Group(G::kSpectra)
          .MayBeUndefined(),
      Entry(&S::isoscore, "hidden_isoscore", "[0, 1]", "IsoScore",
            "IsoScore (Rudman et al. 2022): `λ` = eigenvalues of the centered covariance of "
            "the `N` vectors; `λ̂ = √d · λ / ‖λ‖₂`; `δ = ‖λ̂ − 1‖₂ / √(2(d − √d))`; score "
            "`= ((d − δ²(d − √d))² − d) / (d(d − 1))`, which equals `((tr C)² / ‖C‖_F² − 1) / "
            "(d − 1)` for the covariance `C` (Σλ = tr C, Σλ² = ‖C‖_F²; computed so, without "
            "eigenvalues)",
            "1 isotropic, 0 one direction; centered, so blind to a common offset that "
            "anisotropy sees")
          .Group(G::kSpectra)
          .MayBeUndefined(),
      Entry(&S::token_uniformity, "hidden_token_uniformity", "[-1, 1]",
            "token uniformity (TokenUni)",
            "TokenUni (Yan et al. eq. 3): per sample with `n_s ≥ 2`, `u_s = (‖Σ_{t∈s} x̂_t‖² − "
            "n_s) / (n_s(n_s − 1))`; the mean of `u_s` over those samples",
            "similarity of tokens within a sample, pairs across samples left out")
          .Group(G::kUniformity)
          .MayBeUndefined()
          .Baseline("hidden"),
      Entry(&S::first_token_uniformity, "hidden_first_token_uniformity", "[-1, 1]",
            "first-token uniformity",
            "mean pairwise cosine of the vectors at position 0 of every sample (`[CLS]` for "
            "BERT)",
            "whether the first-position vectors collapse to one vector")
          .Group(G::kUniformity)
          .MayBeUndefined()
          .Baseline("hidden"),
      Entry(&S::max_abs, "hidden_max_abs", "≥ 0", "largest absolute activation",
            "`max_{t,i} |x_t,i|`",
            "massive activations (Sun et al. 2024): a few entries orders of magnitude above "
            "`hidden_median_abs`")
          .Group(G::kActivations),
      Entry(&S::median_abs, "hidden_median_abs", "≥ 0", "median absolute activation",
            "mean over valid `t` of `median_i |x_t,i|`",
            "the typical entry size, the scale to read `hidden_max_abs` against")
          .Group(G::kActivations),

      // ---- Per block l, derived at query time --------------------------------------------
      Derived("qk_mean_cosine_concat", "[-1, 1]", "Q/K mean cosine, heads concatenated",
              "`cos(Q̄, K̄)` where `Q̄`, `K̄` are the per-head means concatenated over heads "
              "(Godey et al. Fig. 23); derived at query time from the stored `q_mean`, "
              "`k_mean`",
              "the alignment of the query and key offsets of the whole block")
          .MayBeUndefined()
          .Baseline("hidden"),

      // ---- Per checkpoint, from the weights alone ----------------------------------------
      Entry(&C::embed_partition_isotropy, "embed_partition_isotropy", "(0, 1]",
            "embedding partition isotropy  I(W)",
            "`I(W) = min_k Z(c_k) / max_k Z(c_k)`, `Z(c) = Σ_i exp(c·w_i)` over the rows `w_i` "
            "of the input embedding matrix, `c_k` ranging over both signs of each unit "
            "eigenvector of `WᵀW` (`±u_1 … ±u_d`, so that the sign an eigensolver picks does "
            "not matter); computed in log space (Mu & Viswanath 2018; Machina & Mercer's `IW`)",
            "1: the embeddings look the same from every principal direction; near 0: strongly "
            "anisotropic")
          .Group(G::kWeights),

      // ---- Vector kinds ------------------------------------------------------------------
      Entry(&H::q_mean, "q_mean", "length d_h", "query mean  Q̄", "`Q̄` (length `d_h`)",
            "its path over steps is Godey et al.'s Fig. 12 (the trajectory)"),
      Entry(&H::k_mean, "k_mean", "length d_h", "key mean  K̄", "`K̄` (length `d_h`)",
            "the same for keys"),
      Entry(&H::q_mean_pre_rotary, "q_mean_pre_rotary", "length d_h",
            "query mean before the rotary embedding",
            "`Q̄` before the rotary embedding (length `d_h`)",
            "averaging rotated vectors shrinks the rotated dimensions; this mean does not")
          .Rotary(),
      Entry(&H::k_mean_pre_rotary, "k_mean_pre_rotary", "length d_h",
            "key mean before the rotary embedding",
            "`K̄` before the rotary embedding (length `d_h`)", "the same for keys")
          .Rotary(),
      Entry(&H::q_sample, "q_sample", "M × d_h", "query token samples",
            "`Q[t_j, h]` at `M` fixed probe positions (token samples)",
            "the cloud of queries (Godey et al. Fig. 11), projected by the token-cloud query")
          .TokenSample(),
      Entry(&H::k_sample, "k_sample", "M × d_h", "key token samples",
            "`K[t_j, h]` at the same `M` positions", "the cloud of keys")
          .TokenSample(),
      Entry(&S::spectrum, "hidden_spectrum", "[0, 1], length min(N, d)",
            "singular value spectrum  σ_i/σ_1",
            "`σ_i / σ_1`, `i = 1 … min(N, d)` (Yan et al. 2022, Fig. 1)",
            "fast decay means token uniformity")
          .Group(G::kSpectra)
          .MayBeUndefined(),
      Entry(&C::final_norm_gain, "final_norm_gain", "length d", "final norm gain",
            "the gain (`weight`) of the last LayerNorm before the output (BERT: the last "
            "block's output LayerNorm; GPT-NeoX `final_layer_norm`; GPT-2 `ln_f`)",
            "which coordinates of the last hidden state the model amplifies or suppresses")
          .Group(G::kWeights),
  };
  std::vector<MetricInfo> catalog;
  for (Row& row : rows) catalog.push_back(std::move(row.info));
  return catalog;
}

std::string Cell(const std::string& text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); }

std::string StoredBy(const MetricInfo& info) {
  if (info.token_sample) return "jobs with token samples";
  return info.families == MetricFamilies::kRotary ? "rotary models" : "all models";
}

std::string RangeCell(const MetricInfo& info) {
  return absl::StrCat(Cell(info.unit), info.may_be_undefined ? "; may be 0/0" : "");
}

}  // namespace

const std::vector<MetricInfo>& MetricCatalog() {
  static const std::vector<MetricInfo> catalog = BuildCatalog();
  return catalog;
}

const MetricInfo* FindMetric(std::string_view name) {
  for (const MetricInfo& info : MetricCatalog()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::vector<std::string> CatalogNames(MetricScope scope, MetricKind kind) {
  std::vector<std::string> names;
  for (const MetricInfo& info : MetricCatalog()) {
    if (info.scope == scope && info.kind == kind) names.push_back(info.name);
  }
  return names;
}

std::string_view MetricScopeName(MetricScope scope) {
  switch (scope) {
    case MetricScope::kHead:
      return "head";
    case MetricScope::kHiddenState:
      return "hidden_state";
    case MetricScope::kCheckpoint:
      return "checkpoint";
    case MetricScope::kBlock:
      return "block";
  }
  return "";
}

std::string_view MetricKindName(MetricKind kind) {
  switch (kind) {
    case MetricKind::kScalar:
      return "scalar";
    case MetricKind::kVector:
      return "vector";
  }
  return "";
}

std::string_view MetricFamiliesName(MetricFamilies families) {
  switch (families) {
    case MetricFamilies::kAll:
      return "all";
    case MetricFamilies::kRotary:
      return "rotary";
  }
  return "";
}

std::string_view MetricGroupName(MetricGroup group) {
  for (const NamedMetricGroup& named : AllMetricGroups()) {
    if (named.group == group) return named.name;
  }
  return "";
}

std::vector<std::string> MetricTableSections() {
  return {"groups", "head", "hidden_state", "block", "checkpoint", "vectors"};
}

std::string MetricTableMarkdown(std::string_view section) {
  std::string out;
  if (section == "groups") {
    out = "| group | what it holds |\n|---|---|\n";
    for (const NamedMetricGroup& group : AllMetricGroups()) {
      absl::StrAppend(&out, "| `", group.name, "` | ", Cell(group.summary), " |\n");
    }
    return out;
  }
  if (section == "vectors") {
    out =
        "| kind | scope | group | stored by | size | definition | what it tells you |\n"
        "|---|---|---|---|---|---|---|\n";
    for (const MetricInfo& info : MetricCatalog()) {
      if (info.kind != MetricKind::kVector) continue;
      const char* scope = info.scope == MetricScope::kHead          ? "block, head"
                          : info.scope == MetricScope::kHiddenState ? "hidden state"
                                                                    : "checkpoint";
      absl::StrAppend(&out, "| `", info.name, "` | ", scope, " | ",
                      std::string(MetricGroupName(info.group)), " | ", StoredBy(info), " | ",
                      RangeCell(info), " | ", Cell(info.definition), " | ", Cell(info.meaning),
                      " |\n");
    }
    return out;
  }
  out = "| name | group | range | definition | what it tells you |\n|---|---|---|---|---|\n";
  for (const MetricInfo& info : MetricCatalog()) {
    if (MetricScopeName(info.scope) != section) continue;
    if (info.kind == MetricKind::kVector && info.scope != MetricScope::kCheckpoint) continue;
    absl::StrAppend(&out, "| `", info.name, "`",
                    info.kind == MetricKind::kVector ? " (vector)" : "", " | ",
                    std::string(MetricGroupName(info.group)), " | ", RangeCell(info), " | ",
                    Cell(info.definition), " | ", Cell(info.meaning), " |\n");
  }
  return out;
}

}  // namespace anisoscope::analysis
