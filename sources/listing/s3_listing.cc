#include "sources/listing/s3_listing.h"

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "sources/cache/cache_names.h"
#include "sources/listing/listing_paths.h"
#include "sources/listing/parallel_for.h"
#include "sources/listing/s3_xml.h"
#include "sources/listing/step_collector.h"
#include "sources/listing/step_files.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::listing {
namespace {

// Every page of one ListObjectsV2 listing of `prefix` (with delimiter=/ when `folders`),
// each handed to `on_page`; bounded by the fetcher's max_pages.
absl::Status ListPages(ListingFetcher& fetcher, const std::string& endpoint,
                       const std::string& bucket, const std::string& prefix, bool folders,
                       int max_keys, absl::string_view where,
                       const std::function<absl::Status(const S3ListPage&)>& on_page) {
  std::string token;
  for (int page = 0;; ++page) {
    if (page >= fetcher.bounds().max_pages) {
      return absl::ResourceExhaustedError(absl::StrCat(where, ": the listing has more than ",
                                                       fetcher.bounds().max_pages,
                                                       " pages (ListingBounds::max_pages)"));
    }
    // The pairs in SigV4's canonical order (sorted by name).
    std::string url = absl::StrCat(endpoint, "/", PercentEncode(bucket, false), "?");
    if (!token.empty()) {
      absl::StrAppend(&url, "continuation-token=", PercentEncode(token, false), "&");
    }
    if (folders) absl::StrAppend(&url, "delimiter=%2F&");
    absl::StrAppend(&url, "list-type=2&max-keys=", max_keys,
                    "&prefix=", PercentEncode(prefix, false));
    ASSIGN_OR_RETURN(transfer::HttpResponse response,
                     fetcher.GetPage(url, "application/xml", where));
    ASSIGN_OR_RETURN(S3ListPage parsed, ParseListObjectsV2(response.body, where));
    RETURN_IF_ERROR(on_page(parsed));
    if (!parsed.truncated) return absl::OkStatus();
    token = parsed.next_continuation_token;
  }
}

// One step folder's files.
absl::StatusOr<RemoteStep> ListFolder(ListingFetcher& fetcher, const S3ListingOptions& options,
                                      const S3Location& location, const NamedStep& step) {
  const std::string folder = absl::StrCat(location.prefix, step.name, "/");
  const std::string where = absl::StrCat("s3://", location.bucket, "/", absl::CHexEscape(folder));
  std::vector<ListedFile> listed;
  RETURN_IF_ERROR(ListPages(
      fetcher, options.endpoint, location.bucket, folder, /*folders=*/false, options.max_keys,
      where, [&](const S3ListPage& page) -> absl::Status {
        for (const S3Object& object : page.objects) {
          absl::string_view relative = object.key;
          if (!absl::ConsumePrefix(&relative, folder)) {
            return absl::InvalidArgumentError(absl::StrCat(where, ": the listing names key '",
                                                           absl::CHexEscape(object.key),
                                                           "' outside the folder"));
          }
          if (object.size == 0 && (relative.empty() || absl::EndsWith(relative, "/"))) {
            continue;  // a folder marker some tools write
          }
          if (static_cast<int64_t>(listed.size()) >= fetcher.bounds().max_entries) {
            return absl::ResourceExhaustedError(
                absl::StrCat(where, ": the folder holds more than ", fetcher.bounds().max_entries,
                             " objects (ListingBounds::max_entries)"));
          }
          listed.push_back({std::string(relative), object.size, "", object.etag});
        }
        return absl::OkStatus();
      }));
  const std::string url_prefix = S3FileUrlPrefix(options.endpoint, location.bucket, folder);
  ASSIGN_OR_RETURN(std::vector<RemoteFile> files, StepFiles(listed, url_prefix, where));
  RemoteStep out;
  out.step = step.step;
  out.name = step.name;
  out.repo = location.bucket;
  out.revision = folder;
  out.files = std::move(files);
  return out;
}

}  // namespace

absl::StatusOr<S3Location> ParseS3Url(absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "s3://")) {
    return absl::InvalidArgumentError("an S3 source is s3://BUCKET/PREFIX/");
  }
  const size_t slash = rest.find('/');
  S3Location location;
  location.bucket = std::string(rest.substr(0, slash));
  RETURN_IF_ERROR(cache::S3BucketRepo(location.bucket).status());
  if (slash != absl::string_view::npos) location.prefix = std::string(rest.substr(slash + 1));
  if (!location.prefix.empty()) {
    if (!absl::EndsWith(location.prefix, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("s3://", location.bucket, ": the prefix must end in '/'"));
    }
    RETURN_IF_ERROR(CheckListedPath(absl::StripSuffix(location.prefix, "/"),
                                    absl::StrCat("s3://", location.bucket)));
  }
  return location;
}

absl::StatusOr<SourceListing> ListS3Prefix(transfer::HttpClient& client, const S3Location& location,
                                           const S3ListingOptions& options) {
  RETURN_IF_ERROR(transfer::OriginOf(options.endpoint).status());
  if (absl::EndsWith(options.endpoint, "/") || options.max_keys < 1 || options.max_keys > 1000) {
    return absl::InvalidArgumentError(
        "the S3 endpoint must not end in '/', and max_keys is 1 to 1000");
  }
  const std::string where = absl::StrCat("s3://", location.bucket, "/", location.prefix);
  ListingFetcher fetcher(client, options.bounds);
  SourceListing listing;
  std::vector<std::string> names;
  RETURN_IF_ERROR(ListPages(
      fetcher, options.endpoint, location.bucket, location.prefix, /*folders=*/true,
      options.max_keys, where, [&](const S3ListPage& page) -> absl::Status {
        for (const std::string& common : page.common_prefixes) {
          absl::string_view name = common;
          if (!absl::ConsumePrefix(&name, location.prefix) || !absl::ConsumeSuffix(&name, "/") ||
              !CheckListedPath(name, where).ok() || absl::StrContains(name, '/')) {
            listing.problems.push_back(
                {common, 0,
                 absl::StrCat(where, ": the listing names folder '", absl::CHexEscape(common),
                              "', not one safe name")});
            continue;
          }
          if (static_cast<int64_t>(names.size()) >= fetcher.bounds().max_entries) {
            return absl::ResourceExhaustedError(
                absl::StrCat(where, ": more than ", fetcher.bounds().max_entries,
                             " folders (ListingBounds::max_entries)"));
          }
          names.emplace_back(name);
        }
        return absl::OkStatus();
      }));
  ASSIGN_OR_RETURN(SelectedSteps selected, SelectSteps(names, options.selection, where));
  RETURN_IF_ERROR(CheckStepCount(static_cast<int64_t>(selected.steps.size()), options.bounds,
                                 where));
  std::vector<NamedStep> to_list;
  for (NamedStep& step : selected.steps) {
    if (options.skip_steps.count(step.step) == 0) to_list.push_back(std::move(step));
  }
  listing.without_step = std::move(selected.without_step);
  for (ListingProblem& missing : selected.missing) listing.problems.push_back(std::move(missing));
  StepCollector collector(listing);
  ParallelFor(to_list.size(), options.bounds.parallel_requests, [&](size_t i) {
    if (collector.failed()) return;
    absl::StatusOr<RemoteStep> step = ListFolder(fetcher, options, location, to_list[i]);
    const bool is_problem = !step.ok() && IsStepProblem(step.status());
    collector.Add(to_list[i].name, to_list[i].step, std::move(step), is_problem);
  });
  RETURN_IF_ERROR(collector.Finish(/*s3=*/true, fetcher.counters()));
  RETURN_IF_ERROR(CheckTotalFiles(listing, options.bounds, where));
  return listing;
}

}  // namespace anisoscope::listing
