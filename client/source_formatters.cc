#include "client/source_formatters.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/formatters.h"
#include "common/proto_json.h"

namespace anisoscope::client {

std::string ShortCommit(const std::string& commit) { return commit.substr(0, 12); }

std::string OriginText(const std::string& source, const std::string& revision,
                       const std::string& commit) {
  if (revision.empty() && commit.empty()) return "";
  std::string text = source.empty() ? revision : absl::StrCat(source, "@", revision);
  if (!commit.empty()) absl::StrAppend(&text, " (commit ", ShortCommit(commit), ")");
  return text;
}

std::string AuditTable(const v1::AuditSourceResponse& response) {
  std::string text = absl::StrCat(response.source(), ": ", response.steps_size(), " step",
                                  response.steps_size() == 1 ? "" : "s", "\n\n");
  std::vector<std::vector<std::string>> rows;
  int64_t total = 0;
  int duplicates = 0;
  for (const v1::AuditStep& step : response.steps()) {
    total += step.size_bytes();
    duplicates += step.has_duplicate_of() ? 1 : 0;
    rows.push_back(
        {absl::StrCat(step.step()), step.name(), step.revision().empty() ? "-" : step.revision(),
         step.commit().empty() ? "-" : ShortCommit(step.commit()), absl::StrCat(step.files_size()),
         ByteSize(static_cast<double>(step.size_bytes())),
         step.has_duplicate_of() ? absl::StrCat(step.duplicate_of()) : "-"});
  }
  if (!rows.empty()) {
    absl::StrAppend(
        &text, RenderTable({"STEP", "NAME", "REVISION", "COMMIT", "FILES", "SIZE", "SAME AS"}, rows,
                           {true, false, false, false, true, true, true}));
  }
  if (response.problems_size() > 0) {
    absl::StrAppend(&text, "\nproblems:\n");
    for (const v1::AuditProblem& problem : response.problems()) {
      absl::StrAppend(&text, "  step ", problem.step(), " (", problem.name(),
                      "): ", problem.reason(), "\n");
    }
  }
  if (response.without_step_size() > 0) {
    absl::StrAppend(&text, "\nnames without a step:\n");
    for (const std::string& name : response.without_step())
      absl::StrAppend(&text, "  ", name, "\n");
  }
  absl::StrAppend(&text, "\n", response.steps_size(), " step",
                  response.steps_size() == 1 ? "" : "s", ", ", ByteSize(static_cast<double>(total)),
                  " in all");
  if (duplicates > 0) {
    absl::StrAppend(&text, "; ", duplicates, " with an earlier step's weights (--dedupe skips ",
                    duplicates == 1 ? "it" : "them", ")");
  }
  if (response.problems_size() > 0)
    absl::StrAppend(&text, "; ", response.problems_size(), " problem",
                    response.problems_size() == 1 ? "" : "s");
  absl::StrAppend(&text, absl::StrFormat("; %d listing request%s in %.1f s, no weight byte read\n",
                                         response.requests(), response.requests() == 1 ? "" : "s",
                                         response.seconds()));
  return text;
}

std::string AuditJson(const v1::AuditSourceResponse& response) {
  return ProtoToJson(response).value_or("null") + "\n";
}

}  // namespace anisoscope::client
