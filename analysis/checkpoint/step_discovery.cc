#include "analysis/checkpoint/step_discovery.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// The step directories named directly under `dir`.
absl::Status ListNamedDirectories(const std::filesystem::path& dir,
                                  std::vector<DiscoveredStep>& steps) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (!it->is_directory(entry_ec)) continue;  // follows symlinks
    if (std::optional<int64_t> step = ParseStep(it->path().filename().string())) {
      steps.push_back({*step, it->path()});
    }
  }
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": cannot list: ", ec.message()));
  }
  return absl::OkStatus();
}

// The snapshots of a cache repository's refs whose revision names (paths under refs/, as
// "step1000" or "pr/1") carry a step. A ref file holds the commit its snapshot is named by.
absl::Status ListCacheSnapshots(const std::filesystem::path& dir,
                                std::vector<DiscoveredStep>& steps) {
  const std::filesystem::path refs = dir / "refs";
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(refs, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (!it->is_regular_file(entry_ec)) continue;
    const std::string revision = it->path().lexically_relative(refs).generic_string();
    const std::optional<int64_t> step = ParseStep(revision);
    if (!step.has_value()) continue;
    std::string commit;
    std::ifstream(it->path()) >> commit;
    const bool hexadecimal = !commit.empty() && commit.size() <= 64 &&
                             std::all_of(commit.begin(), commit.end(), [](char c) {
                               return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                             });
    if (!hexadecimal) {
      return absl::InvalidArgumentError(absl::StrCat(
          it->path().string(), ": a cache ref must hold a commit hash, not '", commit, "'"));
    }
    const std::filesystem::path snapshot = dir / "snapshots" / commit;
    if (std::filesystem::is_directory(snapshot, entry_ec)) steps.push_back({*step, snapshot});
  }
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(refs.string(), ": cannot list: ", ec.message()));
  }
  return absl::OkStatus();
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

absl::StatusOr<std::vector<DiscoveredStep>> DiscoverSteps(const std::filesystem::path& dir) {
  ASSIGN_OR_RETURN(std::vector<DiscoveredStep> steps, ListStepDirectories(dir));
  if (steps.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir.string(), ": no subdirectory names a training step"));
  }
  return steps;
}

bool IsHfCacheRepository(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir / "refs", ec) &&
         std::filesystem::is_directory(dir / "snapshots", ec);
}

absl::StatusOr<std::vector<DiscoveredStep>> ListStepDirectories(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(dir.string(), " is not a directory"));
  }
  std::vector<DiscoveredStep> steps;
  RETURN_IF_ERROR(IsHfCacheRepository(dir) ? ListCacheSnapshots(dir, steps)
                                           : ListNamedDirectories(dir, steps));
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
