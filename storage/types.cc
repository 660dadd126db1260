#include "storage/types.h"

#include "absl/strings/str_cat.h"

namespace anisoscope::storage {

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

const char* StepStateName(StepState state) {
  switch (state) {
    case StepState::kPending:
      return "pending";
    case StepState::kRunning:
      return "running";
    case StepState::kDone:
      return "done";
    case StepState::kSkipped:
      return "skipped";
    case StepState::kFailed:
      return "failed";
    case StepState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState state : kJobStates) {
    if (name == JobStateName(state)) return state;
  }
  return std::nullopt;
}

std::optional<StepState> ParseStepState(std::string_view name) {
  for (StepState state : kStepStates) {
    if (name == StepStateName(state)) return state;
  }
  return std::nullopt;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kReader:
      return "reader";
    case Role::kWriter:
      return "writer";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (const Role role : kRoles) {
    if (name == RoleName(role)) return role;
  }
  return std::nullopt;
}

std::vector<std::string> RoleNames() {
  std::vector<std::string> names;
  for (const Role role : kRoles) names.emplace_back(RoleName(role));
  return names;
}

std::string DedupeSkipReason(int64_t duplicate_of, const std::string& fingerprint) {
  return absl::StrCat("the same weights as step ", duplicate_of, " (", fingerprint,
                      "): not stored (dedupe)");
}

}  // namespace anisoscope::storage
