#include "sources/listing/hub_listing.h"

#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "analysis/checkpoint/step_discovery.h"
#include "common/status_macros.h"
#include "sources/cache/cache_names.h"
#include "sources/listing/hub_json.h"
#include "sources/listing/hub_tree.h"
#include "sources/listing/listing_paths.h"
#include "sources/listing/parallel_for.h"
#include "sources/listing/step_collector.h"
#include "sources/transfer/http_error.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::listing {
namespace {

// One step to list: a repo at a revision.
struct StepJob {
  std::string repo;
  std::string revision;
  std::string name;
  int64_t step = 0;
};

absl::Status CheckEndpoint(absl::string_view endpoint) {
  RETURN_IF_ERROR(transfer::OriginOf(endpoint).status());
  if (absl::EndsWith(endpoint, "/")) {
    return absl::InvalidArgumentError("the Hub endpoint must not end in '/'");
  }
  return absl::OkStatus();
}

// Lists `jobs` in parallel into `listing`; the first error that is not one step's problem
// fails the whole listing.
// With `missing_repo_is_problem` (a repo per step), a repo the Hub does not know
// (RepoNotFound, 401 or 404) is that step's problem too.
absl::Status ListSteps(ListingFetcher& fetcher, absl::string_view endpoint,
                       const std::vector<StepJob>& jobs, bool missing_repo_is_problem,
                       SourceListing& listing) {
  StepCollector collector(listing);
  ParallelFor(jobs.size(), fetcher.bounds().parallel_requests, [&](size_t i) {
    if (collector.failed()) return;
    const StepJob& job = jobs[i];
    absl::StatusOr<RemoteStep> step =
        ListHubStep(fetcher, endpoint, job.repo, job.revision, job.name, job.step);
    const bool is_problem =
        !step.ok() &&
        (IsStepProblem(step.status()) ||
         (missing_repo_is_problem && transfer::HubErrorCodeOf(step.status()) == "RepoNotFound"));
    collector.Add(job.name, job.step, std::move(step), is_problem);
  });
  return collector.Finish(/*s3=*/false, fetcher.counters());
}

// The repo ids GET /api/models?author=&search= finds, every page, under the bounds.
absl::StatusOr<std::vector<std::string>> SearchModels(ListingFetcher& fetcher,
                                                      absl::string_view endpoint,
                                                      absl::string_view author,
                                                      absl::string_view search,
                                                      absl::string_view where) {
  ASSIGN_OR_RETURN(const transfer::UrlOrigin origin, transfer::OriginOf(endpoint));
  std::string url = absl::StrCat(endpoint, "/api/models?author=", PercentEncode(author, false),
                                 "&search=", PercentEncode(search, false), "&limit=1000");
  std::vector<std::string> ids;
  for (int page = 0;; ++page) {
    if (page >= fetcher.bounds().max_pages) {
      return absl::ResourceExhaustedError(absl::StrCat(where, ": the model search has more than ",
                                                       fetcher.bounds().max_pages,
                                                       " pages (ListingBounds::max_pages)"));
    }
    ASSIGN_OR_RETURN(transfer::HttpResponse response,
                     fetcher.GetPage(url, "application/json", where));
    ASSIGN_OR_RETURN(std::vector<std::string> found, ParseHubModelIds(response.body, where));
    ids.insert(ids.end(), found.begin(), found.end());
    if (static_cast<int64_t>(ids.size()) > fetcher.bounds().max_entries) {
      return absl::ResourceExhaustedError(absl::StrCat(where, ": the model search finds more than ",
                                                       fetcher.bounds().max_entries,
                                                       " repos (ListingBounds::max_entries)"));
    }
    const std::optional<std::string> next = NextLink(response.headers.GetAll("Link"));
    if (!next.has_value()) break;
    const absl::StatusOr<transfer::UrlOrigin> next_origin = transfer::OriginOf(*next);
    if (!next_origin.ok() || *next_origin != origin) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the model search's next page is not on the endpoint's origin"));
    }
    url = *next;
  }
  return ids;
}

}  // namespace

absl::StatusOr<SourceListing> ListHubBranches(transfer::HttpClient& client, absl::string_view repo,
                                              const HubListingOptions& options) {
  RETURN_IF_ERROR(cache::HubModelRepo(repo).status());
  RETURN_IF_ERROR(CheckEndpoint(options.endpoint));
  const std::string where = absl::StrCat("hub:", repo);
  ListingFetcher fetcher(client, options.bounds);
  ASSIGN_OR_RETURN(transfer::HttpResponse refs,
                   fetcher.GetPage(absl::StrCat(options.endpoint, "/api/models/", repo, "/refs"),
                                   "application/json", absl::StrCat(where, " refs")));
  ASSIGN_OR_RETURN(std::vector<HubBranch> branches, ParseHubRefs(refs.body, where));
  if (static_cast<int64_t>(branches.size()) > options.bounds.max_entries) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": more than ",
                                                     options.bounds.max_entries,
                                                     " branches (ListingBounds::max_entries)"));
  }
  std::vector<std::string> names;
  std::map<std::string, std::string> commits;
  for (const HubBranch& branch : branches) {
    names.push_back(branch.name);
    commits[branch.name] = branch.commit;
  }
  ASSIGN_OR_RETURN(SelectedSteps selected, SelectSteps(names, options.selection, where));
  RETURN_IF_ERROR(CheckStepCount(static_cast<int64_t>(selected.steps.size()), options.bounds,
                                 where));
  SourceListing listing;
  listing.without_step = std::move(selected.without_step);
  listing.problems = std::move(selected.missing);
  std::vector<StepJob> jobs;
  for (const NamedStep& step : selected.steps) {
    if (options.skip_steps.count(step.step) > 0) continue;
    // The branch name becomes a refs/ file in the cache: refuse what could not be one.
    const absl::Status safe = cache::CheckRevision(step.name, where);
    if (!safe.ok()) {
      listing.problems.push_back(
          {absl::CHexEscape(step.name), step.step, std::string(safe.message())});
      continue;
    }
    const std::string& commit = commits[step.name];
    if (!cache::IsCommitHash(commit)) {
      listing.problems.push_back({step.name, step.step,
                                  absl::StrCat(where, " branch '", absl::CHexEscape(step.name),
                                               "': the refs name no commit for it")});
      continue;
    }
    jobs.push_back({std::string(repo), commit, step.name, step.step});
  }
  RETURN_IF_ERROR(ListSteps(fetcher, options.endpoint, jobs, false, listing));
  RETURN_IF_ERROR(CheckTotalFiles(listing, options.bounds, where));
  // The steps are listed at their commits; say which branch each was.
  for (RemoteStep& step : listing.steps) step.revision = step.name;
  return listing;
}

absl::StatusOr<SourceListing> ListHubSuite(transfer::HttpClient& client, absl::string_view pattern,
                                           const HubSuiteOptions& options) {
  RETURN_IF_ERROR(CheckEndpoint(options.endpoint));
  const std::string where = absl::StrCat("hub-repos:", pattern);
  const size_t slash = pattern.find('/');
  const size_t hole = pattern.find("{}");
  if (slash == absl::string_view::npos || hole == absl::string_view::npos || hole < slash ||
      pattern.find("{}", hole + 2) != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a pattern is ORG/NAME with one \"{}\" in NAME"));
  }
  const absl::string_view org = pattern.substr(0, slash);
  const absl::string_view before = pattern.substr(0, hole);  // "ORG/NAME-PREFIX"
  const absl::string_view after = pattern.substr(hole + 2);
  RETURN_IF_ERROR(cache::HubModelRepo(absl::StrCat(before, "0", after)).status());
  ListingFetcher fetcher(client, options.bounds);
  std::vector<std::string> repos;
  if (!options.values.empty()) {
    for (const std::string& value : options.values) {
      repos.push_back(absl::StrCat(before, value, after));
    }
  } else {
    ASSIGN_OR_RETURN(std::vector<std::string> found,
                     SearchModels(fetcher, options.endpoint, org,
                                  pattern.substr(slash + 1, hole - slash - 1), where));
    for (const std::string& id : found) {
      absl::string_view middle = id;
      if (!absl::ConsumePrefix(&middle, before) || !absl::ConsumeSuffix(&middle, after) ||
          middle.empty() || absl::StrContains(middle, '/')) {
        continue;
      }
      repos.push_back(id);
    }
  }
  if (!options.glob.empty()) {
    std::vector<std::string> kept;
    for (std::string& repo : repos) {
      if (MatchesGlob(options.glob, repo)) kept.push_back(std::move(repo));
    }
    repos = std::move(kept);
  }
  SourceListing listing;
  std::vector<std::string> names;
  for (const std::string& repo : repos) {
    if (!cache::HubModelRepo(repo).ok()) {
      listing.problems.push_back(
          {repo, 0, absl::StrCat(where, ": '", absl::CHexEscape(repo), "' is not a repo id")});
      continue;
    }
    names.push_back(repo);
  }
  // A repo's step is in its NAME (an ORG could carry digits of its own).
  std::vector<std::string> repo_names;
  std::map<std::string, std::string> repo_of;
  for (const std::string& repo : names) {
    const std::string name = repo.substr(repo.find('/') + 1);
    repo_names.push_back(name);
    repo_of[name] = repo;
  }
  ASSIGN_OR_RETURN(SelectedSteps selected, SelectSteps(repo_names, {}, where));
  RETURN_IF_ERROR(CheckStepCount(static_cast<int64_t>(selected.steps.size()), options.bounds,
                                 where));
  for (const std::string& name : selected.without_step)
    listing.without_step.push_back(repo_of[name]);
  std::vector<StepJob> jobs;
  for (const NamedStep& step : selected.steps) {
    if (options.skip_steps.count(step.step) > 0) continue;
    const std::string& repo = repo_of[step.name];
    jobs.push_back({repo, options.revision, repo, step.step});
  }
  RETURN_IF_ERROR(ListSteps(fetcher, options.endpoint, jobs, true, listing));
  RETURN_IF_ERROR(CheckTotalFiles(listing, options.bounds, where));
  return listing;
}

}  // namespace anisoscope::listing
