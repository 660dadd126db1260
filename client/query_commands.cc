#include "client/query_commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/metric_catalog/metric_catalog.h"
#include "client/formatters.h"
#include "client/job_formatters.h"
#include "client/query_support.h"

namespace anisoscope::client {
namespace {

int RunRuns(const ParsedArgs&, const CommandContext& context) {
  v1::ListRunsResponse response;
  if (int code = CallQueryService(context, &v1::QueryService::Stub::ListRuns, v1::ListRunsRequest(),
                                  &response)) {
    return code;
  }
  context.out() << RunsTable({response.runs().begin(), response.runs().end()});
  return kExitOk;
}

int RunQuery(const ParsedArgs& args, const CommandContext& context) {
  if (int code = RequireFlags(args, context, "query", {"run", "metric"})) return code;
  v1::QuerySeriesRequest request;
  request.set_run(args.GetString("run"));
  request.set_metric(args.GetString("metric"));
  request.set_probe_id(args.GetString("probe"));
  if (args.Has("layer")) request.set_layer(static_cast<int32_t>(args.GetInt("layer")));
  if (args.Has("head")) request.set_head(static_cast<int32_t>(args.GetInt("head")));
  SetStepRange(args, &request);
  if (args.Has("since-step")) request.set_since_step(args.GetInt("since-step"));
  request.set_max_points(static_cast<int32_t>(args.GetInt("max-points", 0)));
  v1::QuerySeriesResponse response;
  if (int code =
          CallQueryService(context, &v1::QueryService::Stub::QuerySeries, request, &response)) {
    return code;
  }
  if (response.metric().empty()) response.set_metric(request.metric());
  const std::string format = args.GetString("format", "table");
  if (format == "csv") {
    context.out() << SeriesCsv(response);
  } else if (format == "json") {
    context.out() << SeriesJson(response);
  } else {
    context.out() << SeriesTable(request.run(), response);
  }
  return kExitOk;
}

// The flags a vector kind needs besides --run and --kind: a head's kinds --layer and
// --head, a hidden state's --layer (its index), a checkpoint's none.
std::vector<const char*> WhereFlagsOf(const std::string& kind) {
  switch (analysis::ScopeOfVectorKind(kind).value_or(analysis::MetricScope::kHead)) {
    case analysis::MetricScope::kHead:
      return {"layer", "head"};
    case analysis::MetricScope::kHiddenState:
      return {"layer"};
    case analysis::MetricScope::kCheckpoint:
    case analysis::MetricScope::kBlock:  // no vector kind has it
      return {};
  }
  return {};
}

int RunVectors(const ParsedArgs& args, const CommandContext& context) {
  if (int code = RequireFlags(args, context, "vectors", {"run", "kind"})) return code;
  const std::string kind = args.GetString("kind");
  for (const char* required : WhereFlagsOf(kind)) {
    if (!args.Has(required)) {
      return context.UsageError(
          absl::StrCat("vectors: --", required, " is required for --kind ", kind));
    }
  }
  v1::QueryVectorsRequest request;
  request.set_run(args.GetString("run"));
  request.set_kind(kind);
  request.set_probe_id(args.GetString("probe"));
  request.set_layer(static_cast<int32_t>(args.GetInt("layer", 0)));
  request.set_head(static_cast<int32_t>(args.GetInt("head", 0)));
  SetStepRange(args, &request);
  v1::QueryVectorsResponse response;
  if (int code =
          CallQueryService(context, &v1::QueryService::Stub::QueryVectors, request, &response)) {
    return code;
  }
  context.out() << (args.GetString("format", "json") == "csv" ? VectorsCsv(response)
                                                              : VectorsJson(response));
  return kExitOk;
}

int RunTrajectory(const ParsedArgs& args, const CommandContext& context) {
  if (int code = RequireFlags(args, context, "trajectory", {"run", "layer", "head"})) return code;
  v1::QueryTrajectoryRequest request;
  request.set_run(args.GetString("run"));
  request.set_probe_id(args.GetString("probe"));
  request.set_layer(static_cast<int32_t>(args.GetInt("layer")));
  request.set_head(static_cast<int32_t>(args.GetInt("head")));
  v1::QueryTrajectoryResponse response;
  if (int code =
          CallQueryService(context, &v1::QueryService::Stub::QueryTrajectory, request, &response)) {
    return code;
  }
  const std::string format = args.GetString("format", "table");
  if (format == "csv") {
    context.out() << TrajectoryCsv(response);
  } else if (format == "json") {
    context.out() << TrajectoryJson(response);
  } else {
    context.out() << TrajectoryTable(request.run(), request.layer(), request.head(), response);
  }
  return kExitOk;
}

// Who stores a metric: every job, rotary models only, or jobs that keep token samples.
std::string StoredBy(const analysis::MetricInfo& info) {
  if (info.token_sample) return "jobs with token samples";
  return info.families == analysis::MetricFamilies::kRotary ? "rotary models" : "all";
}

// `anisoscope metrics`: the catalogue compiled into this client (the server's ListMetrics
// serves the same one).
int RunMetrics(const ParsedArgs& args, const CommandContext& context) {
  if (args.GetString("format", "table") == "markdown") {
    const std::string section = args.GetString("section");
    for (const std::string& name : analysis::MetricTableSections()) {
      if (!section.empty() && section != name) continue;
      context.out() << (section.empty() ? absl::StrCat("<!-- metric-catalog: ", name, " -->\n")
                                        : "")
                    << analysis::MetricTableMarkdown(name)
                    << (section.empty() ? "<!-- /metric-catalog -->\n\n" : "");
    }
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const analysis::MetricInfo& info : analysis::MetricCatalog()) {
    rows.push_back({info.name, std::string(analysis::MetricScopeName(info.scope)),
                    std::string(analysis::MetricKindName(info.kind)),
                    std::string(analysis::MetricGroupName(info.group)), StoredBy(info),
                    absl::StrCat(info.unit, info.may_be_undefined ? "; may be 0/0" : "")});
  }
  // RANGE last: RenderTable pads by bytes, and ranges have non-ASCII signs.
  context.out() << RenderTable({"NAME", "SCOPE", "KIND", "GROUP", "STORED BY", "RANGE"}, rows);
  context.out() << "\ngroups (anisoscope submit --metrics):\n";
  for (const analysis::NamedMetricGroup& group : analysis::AllMetricGroups()) {
    context.out() << "  " << group.name << ": " << group.summary << "\n";
  }
  return kExitOk;
}

// --kind's help: every vector kind of the catalogue, with its scope and size.
std::string VectorKindsHelp() {
  std::string help =
      "per head (needs --layer, --head), per hidden state (needs --layer, the hidden\n"
      "state's index) or per checkpoint; 'anisoscope metrics' defines each:";
  for (const analysis::MetricInfo& info : analysis::MetricCatalog()) {
    if (info.kind != analysis::MetricKind::kVector) continue;
    absl::StrAppend(
        &help, "\n  ", info.name, " (", std::string(analysis::MetricScopeName(info.scope)), "; ",
        info.unit, info.families == analysis::MetricFamilies::kRotary ? "; rotary models only" : "",
        info.token_sample ? "; M sampled positions, row-major" : "", ")");
  }
  return help;
}

}  // namespace

std::vector<Command> QueryCommands() {
  CommandSpec runs;
  runs.name = "runs";
  runs.summary =
      "list runs: model family, layers x heads, probes, steps, and steps with an earlier\n"
      "step's weights (SAME WEIGHTS: STEP=EARLIER, equal fingerprints)";

  CommandSpec query;
  query.name = "query";
  query.synopsis =
      "--run NAME --metric M [--layer L] [--head H] [--from-step A] [--to-step B]\n"
      "[--since-step S] [--max-points N] [--probe ID] [--format table|csv|json]";
  query.summary = "print the time series of one metric over training steps";
  query.flags = {
      RunFlag(),
      StringFlag("metric", "M", "the metric (listed below)"),
      IntFlag("layer", "L", "only layer L (default: all)", 0, INT32_MAX),
      IntFlag("head", "H", "only head H (default: all)", 0, INT32_MAX),
  };
  for (FlagSpec& flag : StepRangeFlags()) query.flags.push_back(std::move(flag));
  query.flags.push_back(IntFlag("since-step", "S", "only steps > S (incremental polling)"));
  query.flags.push_back(IntFlag("max-points", "N",
                                "at most about N points per layer/head, keeping each bucket's\n"
                                "min and max and the first and last points (default 0: all)",
                                0, INT32_MAX));
  query.flags.push_back(ProbeFlag());
  query.flags.push_back(
      ChoiceFlag("format", {"table", "csv", "json"},
                 "table (default): a row per step, a column per layer/head, 4 significant\n"
                 "digits; csv: step,layer,head,value; json: [{step, layer, head, value}];\n"
                 "csv and json keep full precision; head is empty (csv) or null (json) for\n"
                 "hidden-state metrics"));
  query.details =
      absl::StrCat("metrics per head:\n  ", absl::StrJoin(analysis::PerHeadMetricNames(), " "),
                   "\nmetrics per hidden state (one value per layer):\n  ",
                   absl::StrJoin(analysis::PerHiddenStateMetricNames(), " "),
                   "\nmetrics per checkpoint (no layer or head):\n  ",
                   absl::StrJoin(analysis::PerCheckpointMetricNames(), " "),
                   "\nmetrics per block, derived from the stored per-head means (no head):\n  ",
                   absl::StrJoin(analysis::PerBlockMetricNames(), " "),
                   "\n'anisoscope metrics' prints each one's scope, group and range\n");

  CommandSpec vectors;
  vectors.name = "vectors";
  vectors.synopsis =
      "--run NAME --kind K [--layer L] [--head H] [--probe ID]\n"
      "[--from-step A] [--to-step B] [--format json|csv]";
  vectors.summary = "print one stored vector (mean Q/K, token samples, spectrum, gain) per step";
  vectors.flags = {
      RunFlag(),
      ChoiceFlag("kind", analysis::AllVectorKinds(), VectorKindsHelp()),
      IntFlag("layer", "L", "the layer, or the hidden state's index", 0, INT32_MAX),
      IntFlag("head", "H", "the head", 0, INT32_MAX),
      ProbeFlag(),
  };
  for (FlagSpec& flag : StepRangeFlags()) vectors.flags.push_back(std::move(flag));
  vectors.flags.push_back(
      ChoiceFlag("format", {"json", "csv"},
                 "json (default): [{\"step\": S, \"values\": [...]}, ...]; csv: step,v0,v1,..."));

  CommandSpec trajectory;
  trajectory.name = "trajectory";
  trajectory.synopsis = "--run NAME --layer L --head H [--probe ID] [--format table|csv|json]";
  trajectory.summary = "print one head's Q/K mean trajectory projected on its top 2 directions";
  trajectory.flags = {
      RunFlag(),
      IntFlag("layer", "L", "the layer", 0, INT32_MAX),
      IntFlag("head", "H", "the head", 0, INT32_MAX),
      ProbeFlag(),
      ChoiceFlag("format", {"table", "csv", "json"},
                 "table (default): step, q_x, q_y, k_x, k_y to 4 significant digits;\n"
                 "csv: the same columns at full precision; json: [{step, q_x, q_y, k_x, k_y}]"),
  };
  trajectory.details =
      "The projection: the top two right singular vectors v1, v2 of the uncentered matrix\n"
      "stacking every stored q_mean and k_mean of the head (computed by the server), each\n"
      "oriented so that the coordinates of all its rows sum to >= 0; q_x = <q_mean, v1>.\n";

  CommandSpec metrics;
  metrics.name = "metrics";
  metrics.synopsis = "[--format table|markdown] [--section S]";
  metrics.summary = "print the metric catalogue: every metric and vector kind, scope, group, range";
  metrics.flags = {
      ChoiceFlag("format", {"table", "markdown"},
                 "table (default): name, scope, kind, group, who stores it, range, then the\n"
                 "groups; markdown: docs/metrics.md's tables, with their definitions"),
      ChoiceFlag("section", analysis::MetricTableSections(),
                 "with --format markdown: only this table"),
  };
  metrics.details =
      "The catalogue compiled into this client; the server serves the same one\n"
      "(QueryService.ListMetrics, GET /api/v1/metrics-catalog). Needs no server.\n";

  return {{runs, RunRuns},
          {query, RunQuery},
          {vectors, RunVectors},
          {trajectory, RunTrajectory},
          {metrics, RunMetrics}};
}

}  // namespace anisoscope::client
