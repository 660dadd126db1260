#include "client/job_formatters.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/formatters.h"
#include "client/source_flags.h"
#include "client/source_formatters.h"

namespace anisoscope::client {

namespace {

// "JOB_STATE_SUCCEEDED" -> "succeeded": the wire enum's own names, so no list repeats them.
std::string EnumWord(const std::string& name, const std::string& prefix) {
  if (name.empty()) return "unknown";
  return absl::AsciiStrToLower(name.substr(prefix.size()));
}

// A run's remote origins in one cell: "hub:ORG/NAME (3 steps); s3://B (1 step)", "-" for none.
std::string OriginsCell(const v1::Run& run) {
  std::vector<std::pair<std::string, int>> counts;  // in the order first seen
  for (const v1::StepOrigin& origin : run.origins()) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& count) { return count.first == origin.source(); });
    if (it == counts.end()) {
      counts.emplace_back(origin.source(), 1);
    } else {
      ++it->second;
    }
  }
  std::vector<std::string> parts;
  for (const auto& [source, steps] : counts) {
    parts.push_back(absl::StrCat(source, " (", steps, steps == 1 ? " step)" : " steps)"));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, "; ");
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  return EnumWord(v1::JobState_Name(state), "JOB_STATE_");
}

std::string StepStateName(v1::StepState state) {
  return EnumWord(v1::StepState_Name(state), "STEP_STATE_");
}

std::string DescribeProbe(const v1::ProbeSpec& probe) {
  const char* source = probe.source() == v1::PROBE_SOURCE_TOKENS ? "tokens"
                       : probe.source() == v1::PROBE_SOURCE_TEXT ? "text"
                                                                 : "unknown";
  std::vector<std::string> details;
  if (probe.source() != v1::PROBE_SOURCE_TOKENS) {
    details.push_back(probe.mode() == v1::PROBE_MODE_LINES ? "lines" : "windows");
  }
  details.push_back(absl::StrCat(probe.samples() > 0 ? probe.samples() : 128, " samples"));
  details.push_back(probe.seq_len() > 0 ? absl::StrCat("seq-len ", probe.seq_len())
                                        : "seq-len model max");
  if (probe.has_token_samples()) {
    details.push_back(absl::StrCat(probe.token_samples(), " token samples"));
  }
  if (!probe.metrics().empty()) details.push_back(absl::StrCat("metrics ", probe.metrics()));
  return absl::StrCat(source, " ", probe.path(), " (", absl::StrJoin(details, ", "), ")");
}

std::string JobsTable(const std::vector<v1::Job>& jobs) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(jobs.size());
  for (const v1::Job& job : jobs) {
    rows.push_back({absl::StrCat(job.id()), job.run(), JobStateName(job.state()),
                    absl::StrCat(job.steps_finished(), "/", job.steps_total()), job.created_at()});
  }
  return RenderTable({"ID", "RUN", "STATE", "FINISHED", "CREATED"}, rows,
                     {true, false, false, true, false});
}

std::string JobDetails(const v1::Job& job) {
  std::string text = absl::StrCat("job ", job.id(), "\n");
  absl::StrAppend(&text, "  run:      ", job.run(), "\n");
  absl::StrAppend(&text, "  state:    ", JobStateName(job.state()), " (", job.steps_finished(), "/",
                  job.steps_total(), " checkpoints finished)\n");
  absl::StrAppend(&text, "  probe:    ", DescribeProbe(job.probe()), "\n");
  if (job.has_source()) absl::StrAppend(&text, "  source:   ", DescribeSource(job.source()), "\n");
  if (job.force()) absl::StrAppend(&text, "  force:    yes\n");
  absl::StrAppend(&text, "  created:  ", job.created_at(), "\n");
  absl::StrAppend(&text, "  updated:  ", job.updated_at(), "\n");
  if (!job.error().empty()) absl::StrAppend(&text, "  error:    ", job.error(), "\n");
  if (job.checkpoints_size() == 0) return text;
  // A remote series' steps say where each was read from: REVISION and COMMIT before ERROR.
  bool remote = false;
  for (const v1::CheckpointStatus& checkpoint : job.checkpoints()) {
    remote = remote || !checkpoint.revision().empty() || !checkpoint.commit().empty();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::CheckpointStatus& checkpoint : job.checkpoints()) {
    const bool timed = checkpoint.state() == v1::STEP_STATE_DONE ||
                       checkpoint.state() == v1::STEP_STATE_FAILED || checkpoint.seconds() > 0;
    rows.push_back({absl::StrCat(checkpoint.step()), StepStateName(checkpoint.state()),
                    timed ? absl::StrFormat("%.1f", checkpoint.seconds()) : "",
                    checkpoint.attempt() > 0 ? absl::StrCat(checkpoint.attempt()) : "",
                    checkpoint.worker(), checkpoint.error()});
    if (remote) {
      rows.back().insert(rows.back().end() - 1,
                         {checkpoint.revision().empty() ? "-" : checkpoint.revision(),
                          checkpoint.commit().empty() ? "-" : ShortCommit(checkpoint.commit())});
    }
  }
  if (remote) {
    return text + "\n" +
           RenderTable(
               {"STEP", "STATE", "SECONDS", "ATTEMPT", "WORKER", "REVISION", "COMMIT", "ERROR"},
               rows, {true, false, true, true, false, false, false, false});
  }
  return text + "\n" +
         RenderTable({"STEP", "STATE", "SECONDS", "ATTEMPT", "WORKER", "ERROR"}, rows,
                     {true, false, true, true, false, false});
}

std::string RunsTable(const std::vector<v1::Run>& runs) {
  bool any_origin = false;
  std::vector<std::vector<std::string>> rows;
  rows.reserve(runs.size());
  for (const v1::Run& run : runs) {
    std::vector<std::string> probes;
    // The server's label first ("probe.jsonl · 128 x 512"), then the id `--probe` takes.
    for (const v1::Probe& probe : run.probes()) {
      probes.push_back(probe.description().empty()
                           ? probe.id()
                           : absl::StrCat(probe.description(), " (", probe.id(), ")"));
    }
    std::string range = "-";
    if (run.steps_size() > 0) {
      const auto [low, high] = std::minmax_element(run.steps().begin(), run.steps().end());
      range = absl::StrCat(*low, "..", *high);
    }
    std::vector<std::string> duplicates;  // STEP=EARLIER: the same weights
    for (const v1::StepDuplicate& duplicate : run.duplicates()) {
      duplicates.push_back(absl::StrCat(duplicate.step(), "=", duplicate.duplicate_of()));
    }
    rows.push_back(
        {run.name(), run.model_family(), absl::StrCat(run.num_layers(), "x", run.num_heads()),
         probes.empty() ? "-" : absl::StrJoin(probes, "; "), absl::StrCat(run.steps_size()), range,
         duplicates.empty() ? "-" : absl::StrJoin(duplicates, ",")});
    any_origin = any_origin || run.origins_size() > 0;
    rows.back().push_back(OriginsCell(run));
  }
  std::vector<std::string> header = {"NAME",  "FAMILY", "LAYERSxHEADS", "PROBES",
                                     "STEPS", "RANGE",  "SAME WEIGHTS"};
  std::vector<bool> right = {false, false, true, false, true, false, false};
  if (any_origin) {  // where the steps read from a remote source came from
    header.push_back("FROM");
    right.push_back(false);
  } else {
    for (std::vector<std::string>& row : rows) row.pop_back();
  }
  return RenderTable(header, rows, right);
}

}  // namespace anisoscope::client
