#include "server/jobs/source_steps.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sources/endpoints/remote_checkpoint.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

absl::StatusOr<SourceAllowList> NamespaceSources(storage::MetricsStore& store,
                                                 const std::string& ns) {
  ASSIGN_OR_RETURN(const std::vector<std::string> entries, store.NamespaceSources(ns));
  absl::StatusOr<SourceAllowList> list = SourceAllowList::Parse(entries, "namespace sources");
  if (!list.ok()) {
    return absl::DataLossError(absl::StrCat("namespace '", ns,
                                            "': a stored source no longer "
                                            "parses (",
                                            list.status().message(), "); set its sources again"));
  }
  return list;
}

absl::StatusOr<listing::SourceListing> ListAllowedSource(const SourceLister& lister,
                                                         storage::MetricsStore& store,
                                                         const std::string& ns,
                                                         const pb::CheckpointSource& source) {
  ASSIGN_OR_RETURN(const SourceAllowList own, NamespaceSources(store, ns));
  RETURN_IF_ERROR(lister.Check(source, own));
  return lister.List(source);
}

std::string ListedDuplicateReason(int64_t duplicate_of) {
  return absl::StrCat("the same weight files as step ", duplicate_of,
                      " (by the listing's hashes): not fetched, not stored (dedupe)");
}

std::map<std::string, int64_t> ListedDuplicateOf(const listing::SourceListing& listing) {
  std::map<std::string, int64_t> step_of;
  for (const listing::RemoteStep& step : listing.steps) step_of[step.name] = step.step;
  std::map<std::string, int64_t> duplicate_of;
  for (const listing::DuplicateGroup& group : listing.duplicates) {
    if (group.names.empty() || step_of.count(group.names.front()) == 0) continue;
    const int64_t first = step_of.at(group.names.front());
    for (size_t i = 1; i < group.names.size(); ++i) {
      const auto member = step_of.find(group.names[i]);
      if (member != step_of.end() && first < member->second) {
        duplicate_of[group.names[i]] = first;
      }
    }
  }
  return duplicate_of;
}

namespace {

// A problem's display path, built and escaped as a listed step's is
// (DescribeRemoteCheckpoint: names only, CHexEscape'd; the separators are left as they are).
std::string ProblemPath(const pb::CheckpointSource& source,
                        const listing::ListingProblem& problem) {
  std::string path = problem.name;
  switch (source.kind_case()) {
    case pb::CheckpointSource::kHub:
      path = absl::StrCat("hub:", source.hub(), "@", problem.name);
      break;
    case pb::CheckpointSource::kHubRepos:
      path = absl::StrCat("hub:", problem.name);
      break;
    case pb::CheckpointSource::kS3:
      path = absl::StrCat(source.s3(), problem.name, "/");
      break;
    case pb::CheckpointSource::KIND_NOT_SET:
      break;
  }
  return absl::CHexEscape(path);
}

// `spec` (step `step`, whose descriptor serializes to `bytes`) made a failed checkpoint
// without its descriptor: too large to send or store.
void FailOversized(int64_t step, size_t bytes, storage::CheckpointSpec* spec) {
  spec->remote.clear();
  spec->state = storage::StepState::kFailed;
  spec->error = absl::StrCat("step ", step, ": its listed descriptor is ", bytes,
                             " bytes serialized, past the bound of ", kMaxRemoteCheckpointBytes,
                             " bytes (4 MiB) on a remote step's files: not fetched");
}

}  // namespace

std::vector<storage::CheckpointSpec> CheckpointsFromListing(const listing::SourceListing& listing,
                                                            const pb::CheckpointSource& source,
                                                            bool dedupe, bool follow,
                                                            const std::set<int64_t>& known,
                                                            std::optional<int64_t> until_step) {
  const pb::SourceKind kind = SourceLister::KindOf(source);
  // name -> the first step of its duplicate group, for every later member.
  const std::map<std::string, int64_t> duplicate_of =
      dedupe ? ListedDuplicateOf(listing) : std::map<std::string, int64_t>();
  auto wanted = [&](int64_t step) {
    return known.count(step) == 0 && !(until_step.has_value() && step > *until_step);
  };
  std::vector<storage::CheckpointSpec> out;
  std::set<int64_t> taken;
  for (const listing::RemoteStep& step : listing.steps) {
    if (!wanted(step.step)) continue;
    const pb::RemoteCheckpoint remote = sources::ToRemoteCheckpoint(step, kind);
    storage::CheckpointSpec& spec = out.emplace_back();
    spec.step = step.step;
    spec.path = sources::DescribeRemoteCheckpoint(remote);
    spec.remote = remote.SerializeAsString();
    spec.revision = remote.revision();
    spec.commit = remote.commit();
    if (spec.remote.size() > kMaxRemoteCheckpointBytes) {
      FailOversized(step.step, spec.remote.size(), &spec);
    } else if (auto it = duplicate_of.find(step.name); it != duplicate_of.end()) {
      spec.state = storage::StepState::kSkipped;
      spec.duplicate_of = it->second;
      spec.error = ListedDuplicateReason(it->second);
    }
    taken.insert(step.step);
  }
  if (!follow) {
    for (const listing::ListingProblem& problem : listing.problems) {
      if (!wanted(problem.step) || !taken.insert(problem.step).second) {
        spdlog::warn("{}: {} (not a checkpoint of the job: its step {} is taken)",
                     SourceLister::Describe(source), problem.reason, problem.step);
        continue;
      }
      storage::CheckpointSpec& spec = out.emplace_back();
      spec.step = problem.step;
      spec.path = ProblemPath(source, problem);
      spec.state = storage::StepState::kFailed;
      spec.error = problem.reason;
    }
  }
  std::sort(out.begin(), out.end(),
            [](const storage::CheckpointSpec& a, const storage::CheckpointSpec& b) {
              return a.step < b.step;
            });
  return out;
}

}  // namespace anisoscope::server
