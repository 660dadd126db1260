// ListRunsInDb, GetRunFromDb, QuerySeriesInDb, CountSeriesInDb and QueryVectorsInDb (declared in
// storage/result_tables.h).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "storage/result_tables.h"

namespace anisoscope::storage {
namespace {

// Errors list known names only while the list stays readable.
constexpr size_t kMaxListedNames = 20;

std::string ListNames(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  if (names.size() > kMaxListedNames) return absl::StrCat(names.size(), " stored");
  return absl::StrJoin(names, ", ");
}

// The id of run `run` of namespace `ns`; NOT_FOUND lists only that namespace's runs.
absl::StatusOr<int64_t> RunId(SqliteDb* db, const std::string& ns, const std::string& run) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT id FROM runs WHERE namespace = ? AND name = ?"));
  RETURN_IF_ERROR(select.BindAll(ns, run));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (found) return select.ColumnInt64(0);
  ASSIGN_OR_RETURN(const std::vector<std::string> runs,
                   TextColumn(db, "SELECT name FROM runs WHERE namespace = ? ORDER BY name", ns));
  return absl::NotFoundError(
      absl::StrCat("run '", run, "' not found; known runs: ", ListNames(runs)));
}

// `probe_id`, or the run's only probe when empty.
absl::StatusOr<std::string> ResolveProbe(SqliteDb* db, int64_t run_id, const std::string& run,
                                         const std::string& probe_id) {
  ASSIGN_OR_RETURN(
      const std::vector<std::string> probes,
      TextColumn(db, "SELECT DISTINCT probe_id FROM steps WHERE run_id = ? ORDER BY probe_id",
                 run_id));
  if (probe_id.empty()) {
    if (probes.size() == 1) return probes[0];
    if (probes.empty()) return absl::NotFoundError(absl::StrCat("run '", run, "' has no steps"));
    return absl::FailedPreconditionError(absl::StrCat("run '", run, "' has several probes (",
                                                      absl::StrJoin(probes, ", "),
                                                      "); name one with --probe ID (Python: "
                                                      "probe=; HTTP: probe_id=)"));
  }
  for (const std::string& probe : probes) {
    if (probe == probe_id) return probe;
  }
  return absl::NotFoundError(absl::StrCat("probe '", probe_id, "' not found for run '", run,
                                          "'; its probes: ", ListNames(probes)));
}

int64_t FromStep(const std::optional<int64_t>& step) {
  return step.value_or(std::numeric_limits<int64_t>::min());
}

int64_t ToStep(const std::optional<int64_t>& step) {
  return step.value_or(std::numeric_limits<int64_t>::max());
}

// A run's row as RunFromRow reads it; callers put the run's id first or nothing.
constexpr char kRunColumns[] = "name, model_family, num_layers, num_heads, head_dim, created_at";

// A run (without probes or steps) from kRunColumns, starting at column `first`.
RunInfo RunFromRow(const Statement& row, int first, const std::string& ns) {
  RunInfo info;
  info.ns = ns;
  info.name = row.ColumnText(first);
  info.model_family = row.ColumnText(first + 1);
  info.num_layers = row.ColumnInt(first + 2);
  info.num_heads = row.ColumnInt(first + 3);
  info.head_dim = row.ColumnInt(first + 4);
  info.created_at = row.ColumnText(first + 5);
  return info;
}

}  // namespace

absl::StatusOr<std::vector<RunInfo>> ListRunsInDb(SqliteDb* db, const std::string& ns) {
  ASSIGN_OR_RETURN(Statement runs,
                   db->Prepare(absl::StrCat("SELECT id, ", kRunColumns,
                                            " FROM runs WHERE namespace = ? ORDER BY name")));
  RETURN_IF_ERROR(runs.BindAll(ns));
  ASSIGN_OR_RETURN(
      Statement probes,
      db->Prepare("SELECT id, description, num_samples, num_tokens FROM probes WHERE "
                  "namespace = ? AND id IN (SELECT probe_id FROM steps WHERE run_id = ?) "
                  "ORDER BY id"));
  ASSIGN_OR_RETURN(Statement steps,
                   db->Prepare("SELECT DISTINCT step FROM steps WHERE run_id = ? ORDER BY step"));
  ASSIGN_OR_RETURN(
      Statement duplicates,
      db->Prepare("SELECT s.step, MIN(t.step), s.fingerprint FROM steps s JOIN steps t ON "
                  "t.run_id = s.run_id AND t.fingerprint = s.fingerprint AND t.step < s.step "
                  "WHERE s.run_id = ? AND s.fingerprint != '' GROUP BY s.step ORDER BY s.step"));
  // One origin per step (the probes of a step were read from one place; the latest stored wins).
  ASSIGN_OR_RETURN(
      Statement origins,
      db->Prepare("SELECT step, origin_source, origin_revision, origin_commit FROM steps "
                  "WHERE run_id = ? AND origin_source != '' AND id IN "
                  "(SELECT MAX(id) FROM steps WHERE run_id = ? GROUP BY step) ORDER BY step"));
  std::vector<RunInfo> out;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, runs.Step());
    if (!row) break;
    const int64_t run_id = runs.ColumnInt64(0);
    RunInfo& info = out.emplace_back(RunFromRow(runs, 1, ns));

    probes.Reset();
    RETURN_IF_ERROR(probes.BindAll(ns, run_id));
    while (true) {
      ASSIGN_OR_RETURN(const bool probe_row, probes.Step());
      if (!probe_row) break;
      ProbeInfo& probe = info.probes.emplace_back();
      probe.id = probes.ColumnText(0);
      probe.description = probes.ColumnText(1);
      probe.num_samples = probes.ColumnInt64(2);
      probe.num_tokens = probes.ColumnInt64(3);
    }
    steps.Reset();
    RETURN_IF_ERROR(steps.BindAll(run_id));
    while (true) {
      ASSIGN_OR_RETURN(const bool step_row, steps.Step());
      if (!step_row) break;
      info.steps.push_back(steps.ColumnInt64(0));
    }
    duplicates.Reset();
    RETURN_IF_ERROR(duplicates.BindAll(run_id));
    while (true) {
      ASSIGN_OR_RETURN(const bool duplicate_row, duplicates.Step());
      if (!duplicate_row) break;
      info.duplicates.push_back(
          {duplicates.ColumnInt64(0), duplicates.ColumnInt64(1), duplicates.ColumnText(2)});
    }
    origins.Reset();
    RETURN_IF_ERROR(origins.BindAll(run_id, run_id));
    while (true) {
      ASSIGN_OR_RETURN(const bool origin_row, origins.Step());
      if (!origin_row) break;
      info.origins.push_back({origins.ColumnInt64(0), origins.ColumnText(1), origins.ColumnText(2),
                              origins.ColumnText(3)});
    }
  }
  return out;
}

absl::StatusOr<RunInfo> GetRunFromDb(SqliteDb* db, const std::string& ns, const std::string& run) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare(absl::StrCat("SELECT ", kRunColumns,
                                            " FROM runs WHERE namespace = ? AND name = ?")));
  RETURN_IF_ERROR(select.BindAll(ns, run));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found) return RunId(db, ns, run).status();  // NOT_FOUND listing the namespace's runs
  return RunFromRow(select, 0, ns);
}

namespace {

// The rows a series query selects: its run, probe and metric resolved, its steps bounded.
struct SeriesSelection {
  int64_t run_id = 0;
  std::string probe_id;
  int64_t metric_id = 0;
  int64_t from_step = 0;
  int64_t to_step = 0;
  bool none = false;  // since_step leaves no step
};

// INVALID_ARGUMENT when run `run_id` stores no value of `metric`, naming the metrics it
// stores; OK when it stores some (an empty answer is then the steps' or layers' bounds).
absl::Status CheckRunStoresMetric(SqliteDb* db, int64_t run_id, const SeriesQuery& query) {
  // One probe of the key (step_id, metric_id, ...) per step of the run until one has it: a
  // run that stores the metric answers at its first step.
  ASSIGN_OR_RETURN(Statement stored,
                   db->Prepare("SELECT 1 FROM steps s JOIN series v ON v.step_id = s.id "
                               "JOIN metrics m ON m.id = v.metric_id "
                               "WHERE s.run_id = ? AND m.name = ? LIMIT 1"));
  RETURN_IF_ERROR(stored.BindAll(run_id, query.metric));
  ASSIGN_OR_RETURN(const bool any, stored.Step());
  if (any) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<std::string> metrics,
                   TextColumn(db,
                              "SELECT name FROM metrics WHERE id IN (SELECT DISTINCT v.metric_id "
                              "FROM series v JOIN steps s ON v.step_id = s.id WHERE s.run_id = ?) "
                              "ORDER BY name",
                              run_id));
  return absl::InvalidArgumentError(absl::StrCat(
      "run '", query.run, "' stores no '", query.metric,
      "' values: its jobs did not compute that metric's group (submit --metrics); its metrics: ",
      absl::StrJoin(metrics, ", ")));
}

// The FROM and WHERE of a series query, bound by BindSelection (?1 to ?9). Layer and head
// are ranges (one value when given) so that the key (step_id, metric_id, layer, head) finds
// a layer's or a head's points without reading the others.
constexpr char kSeriesRows[] =
    "FROM steps s JOIN series v ON v.step_id = s.id "
    "WHERE s.run_id = ?1 AND s.probe_id = ?2 AND s.step BETWEEN ?3 AND ?4 "
    "AND v.metric_id = ?5 AND v.layer BETWEEN ?6 AND ?7 AND v.head BETWEEN ?8 AND ?9";

absl::StatusOr<SeriesSelection> SelectSeries(SqliteDb* db, const SeriesQuery& query) {
  SeriesSelection selection;
  ASSIGN_OR_RETURN(selection.run_id, RunId(db, query.ns, query.run));
  ASSIGN_OR_RETURN(selection.probe_id,
                   ResolveProbe(db, selection.run_id, query.run, query.probe_id));
  ASSIGN_OR_RETURN(Statement metric, db->Prepare("SELECT id FROM metrics WHERE name = ?"));
  RETURN_IF_ERROR(metric.BindAll(query.metric));
  ASSIGN_OR_RETURN(const bool known, metric.Step());
  if (!known && query.defined_metric) {
    RETURN_IF_ERROR(CheckRunStoresMetric(db, selection.run_id, query));
  }
  if (!known) {
    ASSIGN_OR_RETURN(const std::vector<std::string> metrics,
                     TextColumn(db, "SELECT name FROM metrics ORDER BY name"));
    return absl::InvalidArgumentError(
        absl::StrCat("unknown metric '", query.metric, "'; known metrics: ", ListNames(metrics)));
  }
  selection.metric_id = metric.ColumnInt64(0);
  selection.from_step = FromStep(query.from_step);
  selection.to_step = ToStep(query.to_step);
  if (query.after_step.has_value()) {
    if (*query.after_step == std::numeric_limits<int64_t>::max()) {
      selection.none = true;
    } else {
      selection.from_step = std::max(selection.from_step, *query.after_step + 1);
    }
  }
  return selection;
}

absl::Status BindSelection(Statement& statement, const SeriesSelection& selection,
                           const SeriesQuery& query) {
  constexpr int64_t kLowest = std::numeric_limits<int>::min();
  constexpr int64_t kHighest = std::numeric_limits<int>::max();
  return statement.BindAll(selection.run_id, selection.probe_id, selection.from_step,
                           selection.to_step, selection.metric_id,
                           query.layer.has_value() ? int64_t{*query.layer} : kLowest,
                           query.layer.has_value() ? int64_t{*query.layer} : kHighest,
                           query.head.has_value() ? int64_t{*query.head} : kLowest,
                           query.head.has_value() ? int64_t{*query.head} : kHighest);
}

}  // namespace

absl::StatusOr<SeriesResult> QuerySeriesInDb(SqliteDb* db, const SeriesQuery& query) {
  ASSIGN_OR_RETURN(const SeriesSelection selection, SelectSeries(db, query));
  SeriesResult result;
  result.probe_id = selection.probe_id;
  if (selection.none) return result;
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare(absl::StrCat("SELECT s.step, v.layer, v.head, v.value ", kSeriesRows,
                                            " ORDER BY v.layer, v.head, s.step")));
  RETURN_IF_ERROR(BindSelection(select, selection, query));
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    if (query.limit > 0 && static_cast<int64_t>(result.points.size()) >= query.limit) {
      result.more = true;  // the limit + 1st point: stop before reading it
      break;
    }
    SeriesPoint& point = result.points.emplace_back();
    point.step = select.ColumnInt64(0);
    point.layer = select.ColumnInt(1);
    point.head = select.ColumnInt(2);
    // SQLite stores NaN as NULL.
    point.value =
        select.ColumnIsNull(3) ? std::numeric_limits<double>::quiet_NaN() : select.ColumnDouble(3);
  }
  if (result.points.empty() && query.defined_metric) {
    // Only an empty answer pays for the scan that tells a metric the run lacks apart.
    RETURN_IF_ERROR(CheckRunStoresMetric(db, selection.run_id, query));
  }
  return result;
}

absl::StatusOr<SeriesCounts> CountSeriesInDb(SqliteDb* db, const SeriesQuery& query) {
  ASSIGN_OR_RETURN(const SeriesSelection selection, SelectSeries(db, query));
  SeriesCounts counts;
  counts.probe_id = selection.probe_id;
  if (selection.none) return counts;
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare(absl::StrCat("SELECT v.layer, v.head, COUNT(*) ", kSeriesRows,
                                            " GROUP BY v.layer, v.head ORDER BY v.layer, v.head")));
  RETURN_IF_ERROR(BindSelection(select, selection, query));
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    counts.series.push_back({select.ColumnInt(0), select.ColumnInt(1), select.ColumnInt64(2)});
  }
  return counts;
}

absl::StatusOr<VectorResult> QueryVectorsInDb(SqliteDb* db, const VectorQuery& query) {
  ASSIGN_OR_RETURN(const int64_t run_id, RunId(db, query.ns, query.run));
  VectorResult result;
  ASSIGN_OR_RETURN(result.probe_id, ResolveProbe(db, run_id, query.run, query.probe_id));

  constexpr char kVectorRows[] =
      "FROM steps s JOIN vectors v ON v.step_id = s.id "
      "WHERE s.run_id = ? AND s.probe_id = ? AND s.step BETWEEN ? AND ? "
      "AND v.kind = ? AND v.layer = ? AND v.head = ?";
  // The size first: length() of a blob is read from its record header, not its content.
  ASSIGN_OR_RETURN(Statement size, db->Prepare(absl::StrCat(
                                       "SELECT COUNT(*), TOTAL(length(v.data)) ", kVectorRows)));
  RETURN_IF_ERROR(size.BindAll(run_id, result.probe_id, FromStep(query.from_step),
                               ToStep(query.to_step), query.kind, query.layer, query.head));
  ASSIGN_OR_RETURN(const bool sized, size.Step());
  const int64_t vectors = sized ? size.ColumnInt64(0) : 0;
  result.values = sized ? static_cast<int64_t>(size.ColumnDouble(1)) / 8 : 0;
  if (query.max_values.has_value() && result.values > *query.max_values) return result;
  ASSIGN_OR_RETURN(Statement select, db->Prepare(absl::StrCat("SELECT s.step, v.data ", kVectorRows,
                                                              " ORDER BY s.step")));
  RETURN_IF_ERROR(select.BindAll(run_id, result.probe_id, FromStep(query.from_step),
                                 ToStep(query.to_step), query.kind, query.layer, query.head));
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    VectorPoint& point = result.points.emplace_back();
    point.step = select.ColumnInt64(0);
    ASSIGN_OR_RETURN(point.values, DecodeFloat64s(select.ColumnBlob(1)));
  }
  if (vectors == 0 && result.points.empty()) {
    // Only an empty answer pays for the scan that tells a kind the run lacks apart.
    ASSIGN_OR_RETURN(const std::vector<std::string> kinds,
                     TextColumn(db,
                                "SELECT DISTINCT v.kind FROM vectors v JOIN steps s "
                                "ON v.step_id = s.id WHERE s.run_id = ? ORDER BY v.kind",
                                run_id));
    if (std::find(kinds.begin(), kinds.end(), query.kind) == kinds.end()) {
      return absl::InvalidArgumentError(absl::StrCat("run '", query.run, "' has no '", query.kind,
                                                     "' vectors; its kinds: ", ListNames(kinds)));
    }
  }
  return result;
}

}  // namespace anisoscope::storage
