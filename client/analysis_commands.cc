#include "client/analysis_commands.h"

#include "absl/strings/str_cat.h"
#include "client/analysis_formatters.h"
#include "client/formatters.h"
#include "client/query_support.h"

namespace anisoscope::client {
namespace {

// `table` in the --format the arguments name (`fallback` when none).
std::string Formatted(const ParsedArgs& args, const NumberTable& table, const char* fallback) {
  const std::string format = args.GetString("format", fallback);
  if (format == "csv") return NumberTableCsv(table);
  if (format == "json") return NumberTableJson(table);
  return NumberTableText(table);
}

int RunTokenCloud(const ParsedArgs& args, const CommandContext& context) {
  if (int code = RequireFlags(args, context, "token-cloud", {"run", "layer", "head"})) return code;
  v1::QueryTokenCloudRequest request;
  request.set_run(args.GetString("run"));
  request.set_probe_id(args.GetString("probe"));
  request.set_layer(static_cast<int32_t>(args.GetInt("layer")));
  request.set_head(static_cast<int32_t>(args.GetInt("head")));
  request.set_basis(args.GetString("basis", "union"));
  v1::QueryTokenCloudResponse response;
  if (int code =
          CallQueryService(context, &v1::QueryService::Stub::QueryTokenCloud, request, &response)) {
    return code;
  }
  if (args.GetString("format", "csv") == "table") {
    context.out() << "run " << request.run() << "  layer " << request.layer() << "  head "
                  << request.head() << "  probe " << response.probe_id() << "  explained variance "
                  << ShortNumber(response.explained_variance()) << "\n"
                  << response.description() << "\n";
  }
  context.out() << Formatted(args, TokenCloudTable(response), "csv");
  return kExitOk;
}

int RunCorrelation(const ParsedArgs& args, const CommandContext& context) {
  if (int code = RequireFlags(args, context, "correlation", {"run"})) return code;
  v1::QueryCorrelationRequest request;
  request.set_run(args.GetString("run"));
  request.set_probe_id(args.GetString("probe"));
  SetStepRange(args, &request);
  v1::QueryCorrelationResponse response;
  if (int code = CallQueryService(context, &v1::QueryService::Stub::QueryCorrelation, request,
                                  &response)) {
    return code;
  }
  context.out() << Formatted(args, CorrelationTable(response), "table");
  return kExitOk;
}

int RunIsotropicBaseline(const ParsedArgs& args, const CommandContext& context) {
  if (int code = RequireFlags(args, context, "isotropic-baseline", {"dimension"})) return code;
  v1::QueryIsotropicBaselineRequest request;
  request.set_dimension(static_cast<int32_t>(args.GetInt("dimension")));
  v1::QueryIsotropicBaselineResponse response;
  if (int code = CallQueryService(context, &v1::QueryService::Stub::QueryIsotropicBaseline, request,
                                  &response)) {
    return code;
  }
  context.out() << FullPrecision(response.cosine_p95()) << "\n";
  return kExitOk;
}

FlagSpec FormatFlag(const char* fallback) {
  return ChoiceFlag("format", {"table", "csv", "json"},
                    absl::StrCat("table: 4 significant digits; csv, json: full precision "
                                 "(default ",
                                 fallback, ")"));
}

}  // namespace

std::vector<Command> AnalysisCommands() {
  CommandSpec cloud;
  cloud.name = "token-cloud";
  cloud.synopsis =
      "--run NAME --layer L --head H [--basis union|q|k] [--probe ID] [--format csv|json|table]";
  cloud.summary = "print one head's Q and K token samples per step, projected on 2 directions";
  cloud.flags = {
      RunFlag(),
      IntFlag("layer", "L", "the layer", 0, INT32_MAX),
      IntFlag("head", "H", "the head", 0, INT32_MAX),
      ChoiceFlag("basis", {"union", "q", "k"},
                 "the samples whose SVD gives the plane: union (default): Q and K; q: Q only;\n"
                 "k: K only (Godey et al. Appendix C). Both clouds are projected on it"),
      ProbeFlag(),
      FormatFlag("csv"),
  };
  cloud.details =
      "Columns step, token, q_x, q_y, k_x, k_y: token j is the probe's j-th sampled position\n"
      "(the same tokens at every step). The plane: the top two right singular vectors of the\n"
      "uncentered stack of the chosen samples over all stored steps, each oriented so that\n"
      "the coordinates of its rows sum to >= 0 (as 'trajectory').\n";

  CommandSpec correlation;
  correlation.name = "correlation";
  correlation.synopsis =
      "--run NAME [--from-step A] [--to-step B] [--probe ID] [--format table|csv|json]";
  correlation.summary = "per step: do hidden states' norms and anisotropy correlate over layers?";
  correlation.flags = {
      RunFlag(),
      ProbeFlag(),
      FormatFlag("table"),
  };
  for (FlagSpec& flag : StepRangeFlags()) correlation.flags.push_back(std::move(flag));
  correlation.details =
      "Per step, over the hidden states 0..L: Spearman's rho and Pearson's r of\n"
      "hidden_mean_norm against hidden_anisotropy, each with its two-sided p-value (Student's\n"
      "t with L - 1 degrees of freedom, as scipy.stats.spearmanr / pearsonr).\n";

  CommandSpec baseline;
  baseline.name = "isotropic-baseline";
  baseline.synopsis = "--dimension D";
  baseline.summary = "print the 95th percentile of the cosine of two isotropic vectors in R^D";
  baseline.flags = {
      IntFlag("dimension", "D", "the dimension (head_dim or hidden size), >= 2", 2, 1 << 24)};
  baseline.details =
      "(1 + cos) / 2 ~ Beta((D-1)/2, (D-1)/2): a mean cosine above this value is anisotropy\n"
      "that isotropic vectors would show less than 5% of the time.\n";

  return {{cloud, RunTokenCloud}, {correlation, RunCorrelation}, {baseline, RunIsotropicBaseline}};
}

}  // namespace anisoscope::client
