// The metric catalogue: every stored metric and vector kind, and the per-block metric derived
// at query time, defined once (name, scope, kind, group, which models store it, unit or
// range, definition). Plain C++, no LibTorch. The name lists of checkpoint_metrics.h, the
// server's ListMetrics and GET /api/v1/metrics-catalog, the CLI's --help and `anisoscope
// metrics`, the dashboard, the Python client and docs/metrics.md's tables all read it.
// Adding a metric: its field in checkpoint_metrics.h, its computation, and one row in
// metric_catalog.cc.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/metric_catalog/metric_groups.h"

namespace anisoscope::analysis {

enum class MetricKind { kScalar, kVector };

// Which model families store it: all, or rotary ones only (the pre-rotary means).
enum class MetricFamilies { kAll, kRotary };

// Where the engine keeps the value in CheckpointMetrics; monostate for a metric derived at
// query time (per block). The scope and kind follow from it.
using MetricField =
    std::variant<std::monostate, double HeadMetrics::*, std::vector<double> HeadMetrics::*,
                 double HiddenStateMetrics::*, std::vector<double> HiddenStateMetrics::*,
                 double CheckpointMetrics::*, std::vector<double> CheckpointMetrics::*>;

struct MetricInfo {
  std::string name;
  MetricScope scope = MetricScope::kHead;
  MetricKind kind = MetricKind::kScalar;
  MetricGroup group = MetricGroup::kCore;
  MetricFamilies families = MetricFamilies::kAll;
  // Stored only when the job keeps token samples (--token-samples > 0): q_sample, k_sample.
  bool token_sample = false;
  // Derived at query time from stored vectors, never stored (per block).
  bool derived = false;
  // Its METRICS.md definition is a ratio that is 0/0 in a degenerate case (a zero mean, fewer
  // than two vectors, equal or zero singular values, d = 1), so another implementation may
  // give NaN there (this engine gives 0). Every other value is finite; none is ±inf.
  bool may_be_undefined = false;
  // A cosine (or mean pairwise cosine) of vectors of the head's size ("head") or the hidden
  // size ("hidden"), which the isotropic baseline applies to; empty otherwise.
  std::string baseline;
  std::string label;       // short, for a chart's title
  std::string unit;        // unit or range, e.g. "nats, ≥ 0", "[-1, 1]", "length d_h"
  std::string definition;  // one line, Markdown inline (`code`), from METRICS.md
  std::string meaning;     // what it tells you, one line
  MetricField field;
};

// Every entry, in a fixed order: per head, per hidden state, per block, per checkpoint, then
// the vector kinds. Names are unique across scopes and kinds.
const std::vector<MetricInfo>& MetricCatalog();
// The entry named `name` (metric or vector kind); nullptr when there is none.
const MetricInfo* FindMetric(std::string_view name);
// The names of the catalogue's entries of `scope` and `kind`, in catalogue order.
std::vector<std::string> CatalogNames(MetricScope scope, MetricKind kind);

// "head", "hidden_state", "checkpoint", "block".
std::string_view MetricScopeName(MetricScope scope);
// "scalar", "vector".
std::string_view MetricKindName(MetricKind kind);
// "all", "rotary".
std::string_view MetricFamiliesName(MetricFamilies families);
// The group's name in AllMetricGroups ("core", …).
std::string_view MetricGroupName(MetricGroup group);

// docs/metrics.md's tables, generated from the catalogue (tests/docs checks the file against
// them; `anisoscope metrics --format markdown` prints them): "groups" (the metric groups),
// "head", "hidden_state", "block", "checkpoint" (the scalars of that scope, and its vectors)
// and "vectors" (every vector kind). Empty for another section.
std::vector<std::string> MetricTableSections();
std::string MetricTableMarkdown(std::string_view section);

}  // namespace anisoscope::analysis
