#include "analysis/checkpoint/step_discovery.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// Parses digits at `pos` with an optional k/K (1e3) or M (1e6) suffix that must end the
// token (end of name or a non-alphanumeric character). nullopt otherwise or on overflow.
std::optional<int64_t> ParseCount(std::string_view name, size_t pos) {
  size_t end = pos;
  int64_t value = 0;
  while (end < name.size() && IsDigit(name[end])) {
    const int digit = name[end] - '0';
    if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++end;
  }
  if (end == pos) return std::nullopt;
  int64_t scale = 1;
  if (end < name.size() && (name[end] == 'k' || name[end] == 'K')) {
    scale = 1000;
    ++end;
  } else if (end < name.size() && name[end] == 'M') {
    scale = 1000000;
    ++end;
  }
  if (end < name.size() && IsAlnum(name[end])) return std::nullopt;
  if (value > std::numeric_limits<int64_t>::max() / scale) return std::nullopt;
  return value * scale;
}

// The count after the first `keyword` that starts a token and is followed by an optional
// '_' or '-' and digits, e.g. "step_20k", "step1000", "checkpoint-200".
std::optional<int64_t> AfterKeyword(std::string_view name, std::string_view keyword) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (size_t at = lower.find(keyword); at != std::string::npos; at = lower.find(keyword, at + 1)) {
    if (at > 0 && IsAlpha(lower[at - 1])) continue;
    size_t pos = at + keyword.size();
    if (pos < name.size() && (name[pos] == '_' || name[pos] == '-')) ++pos;
    if (std::optional<int64_t> count = ParseCount(name, pos)) return count;
  }
  return std::nullopt;
}

// A ref names a commit: 40 (SHA-1) or 64 (SHA-256) hex digits and a newline at most.
constexpr uint64_t kMaxRefBytes = 1024;
// refs/ holds REVISION files and folders of them ("pr/1"); deeper is no cache's.
constexpr int kMaxRefDepth = 4;

// A link named as a step that the gate cannot follow: refused, not silently skipped.
absl::Status LinkOutside(const std::filesystem::path& entry) {
  return absl::PermissionDeniedError(
      absl::StrCat("'", entry.string(), "' is not a directory beneath an allowed root"));
}

// The step directories named directly under `dir`.
absl::Status ListNamedDirectories(const std::filesystem::path& dir, const FileGate& gate,
                                  std::vector<DiscoveredStep>& steps) {
  ASSIGN_OR_RETURN(const std::vector<GatedEntry> entries, gate.List(dir));
  for (const GatedEntry& entry : entries) {
    const std::optional<int64_t> step = ParseStep(entry.name);
    if (!step.has_value() || entry.is_file) continue;
    if (!entry.is_directory) {
      if (entry.is_link) return LinkOutside(dir / entry.name);
      continue;
    }
    steps.push_back({*step, dir / entry.name});
  }
  return absl::OkStatus();
}

// `text` (a ref file's content) without its line end.
std::string_view WithoutLineEnd(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

// Whether `text` is a commit hash.
bool IsCommitHash(std::string_view text) {
  return !text.empty() && text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// The ref files beneath `refs`/`revision` (revision "" at the top), depth first.
absl::Status ListRefs(const FileGate& cache, const std::filesystem::path& refs,
                      const std::string& revision, int depth, std::vector<std::string>& revisions) {
  if (depth > kMaxRefDepth) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<GatedEntry> entries,
                   cache.List(revision.empty() ? refs : refs / revision));
  for (const GatedEntry& entry : entries) {
    const std::string name = revision.empty() ? entry.name : revision + "/" + entry.name;
    // A link leading out of the folder is kept, to be refused by name when read.
    if (entry.is_file || (entry.is_link && !entry.is_directory)) revisions.push_back(name);
    if (entry.is_directory) RETURN_IF_ERROR(ListRefs(cache, refs, name, depth + 1, revisions));
  }
  return absl::OkStatus();
}

// The snapshots of a cache repository's refs whose revision names (paths under refs/, as
// "step1000" or "pr/1") carry a step. A ref file holds the commit its snapshot is named by.
// Everything is read through a gate within `dir`.
absl::Status ListCacheSnapshots(const std::filesystem::path& dir, const FileGate& gate,
                                std::vector<DiscoveredStep>& steps) {
  ASSIGN_OR_RETURN(const FileGate cache, gate.Within(dir));
  const std::filesystem::path refs = dir / "refs";
  std::vector<std::string> revisions;
  RETURN_IF_ERROR(ListRefs(cache, refs, "", 0, revisions));
  for (const std::string& revision : revisions) {
    const std::optional<int64_t> step = ParseStep(revision);
    if (!step.has_value()) continue;
    absl::StatusOr<std::string> commit = cache.ReadFile(refs / revision, kMaxRefBytes);
    const std::string_view hash = commit.ok() ? WithoutLineEnd(*commit) : std::string_view();
    if (!IsCommitHash(hash)) {
      return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": cache ref '", revision,
                                                     "' must be a file of at most ", kMaxRefBytes,
                                                     " bytes holding a commit hash"));
    }
    const std::filesystem::path snapshot = dir / "snapshots" / std::string(hash);
    if (cache.IsDirectory(snapshot)) steps.push_back({*step, snapshot});
  }
  return absl::OkStatus();
}

// What `dir` holds, for the error that finds no step in it: "found: bin/, notes.txt" (folders
// with a '/', the first kMaxFoundNames by name), or "it is empty".
constexpr size_t kMaxFoundNames = 8;
std::string FoundEntries(const std::filesystem::path& dir, const FileGate& gate) {
  absl::StatusOr<std::vector<GatedEntry>> entries = gate.List(dir);
  if (!entries.ok() || entries->empty()) return "it is empty";
  std::vector<std::string> names;
  for (const GatedEntry& entry : *entries) {
    names.push_back(entry.is_directory ? entry.name + "/" : entry.name);
  }
  std::sort(names.begin(), names.end());
  const size_t more = names.size() > kMaxFoundNames ? names.size() - kMaxFoundNames : 0;
  names.resize(names.size() - more);
  return absl::StrCat("found: ", absl::StrJoin(names, ", "),
                      more > 0 ? absl::StrCat(" and ", more, " more") : "");
}

}  // namespace

std::optional<int64_t> ParseStep(std::string_view directory_name) {
  if (std::optional<int64_t> step = AfterKeyword(directory_name, "step")) return step;
  if (std::optional<int64_t> step = AfterKeyword(directory_name, "checkpoint")) return step;
  if (std::optional<int64_t> step = AfterKeyword(directory_name, "ckpt")) return step;
  if (!directory_name.empty() &&
      std::all_of(directory_name.begin(), directory_name.end(), IsDigit)) {
    return ParseCount(directory_name, 0);
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<DiscoveredStep>> DiscoverSteps(const std::filesystem::path& dir,
                                                          const FileGate& gate) {
  ASSIGN_OR_RETURN(std::vector<DiscoveredStep> steps, ListStepDirectories(dir, gate));
  if (steps.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir.string(), ": no subdirectory names a training step (", FoundEntries(dir, gate),
        "); name them like step1000, checkpoint-1000 or 1000, or give each checkpoint with "
        "--checkpoint STEP=PATH"));
  }
  return steps;
}

bool IsHfCacheRepository(const std::filesystem::path& dir, const FileGate& gate) {
  const absl::StatusOr<FileGate> cache = gate.Within(dir);
  return cache.ok() && cache->IsDirectory(dir / "refs") && cache->IsDirectory(dir / "snapshots");
}

absl::StatusOr<std::vector<DiscoveredStep>> ListStepDirectories(const std::filesystem::path& dir,
                                                                const FileGate& gate) {
  RETURN_IF_ERROR(gate.OpenDirectory(dir).status());
  std::vector<DiscoveredStep> steps;
  RETURN_IF_ERROR(IsHfCacheRepository(dir, gate) ? ListCacheSnapshots(dir, gate, steps)
                                                 : ListNamedDirectories(dir, gate, steps));
  std::sort(steps.begin(), steps.end(), [](const DiscoveredStep& a, const DiscoveredStep& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;
  });
  for (size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].step == steps[i - 1].step) {
      return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": ", steps[i - 1].path.string(),
                                                     " and ", steps[i].path.string(),
                                                     " both name step ", steps[i].step));
    }
  }
  return steps;
}

}  // namespace anisoscope::analysis
