#include "sources/listing/hub_tree.h"

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sources/cache/cache_names.h"
#include "sources/listing/hub_json.h"
#include "sources/listing/listing_paths.h"
#include "sources/listing/step_files.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::listing {

absl::StatusOr<RemoteStep> ListHubStep(ListingFetcher& fetcher, absl::string_view endpoint,
                                       absl::string_view repo, absl::string_view revision,
                                       absl::string_view name, int64_t step) {
  const std::string where =
      absl::StrCat("hub:", repo, " revision '", absl::CHexEscape(revision), "'");
  ASSIGN_OR_RETURN(const transfer::UrlOrigin origin, transfer::OriginOf(endpoint));
  std::string url = absl::StrCat(endpoint, "/api/models/", repo, "/tree/",
                                 PercentEncode(revision, /*keep_slash=*/false), "?recursive=true");
  const ListingBounds& bounds = fetcher.bounds();
  std::string commit;
  std::vector<ListedFile> listed;
  for (int page = 0;; ++page) {
    if (page >= bounds.max_pages) {
      return absl::ResourceExhaustedError(absl::StrCat(where, ": the tree listing has more than ",
                                                       bounds.max_pages,
                                                       " pages (ListingBounds::max_pages)"));
    }
    ASSIGN_OR_RETURN(transfer::HttpResponse response,
                     fetcher.GetPage(url, "application/json", where));
    const std::optional<std::string> page_commit = response.headers.Get("X-Repo-Commit");
    if (!page_commit.has_value() || !cache::IsCommitHash(*page_commit) ||
        (!commit.empty() && *page_commit != commit)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the tree listing names no commit, or changes it"));
    }
    commit = *page_commit;
    ASSIGN_OR_RETURN(std::vector<HubTreeFile> files, ParseHubTreePage(response.body, where));
    for (HubTreeFile& file : files) {
      if (static_cast<int64_t>(listed.size()) >= bounds.max_entries) {
        return absl::ResourceExhaustedError(absl::StrCat(where, ": the tree lists more than ",
                                                         bounds.max_entries,
                                                         " files (ListingBounds::max_entries)"));
      }
      std::string etag = file.sha256.empty() ? file.oid : file.sha256;
      listed.push_back({std::move(file.path), file.size, std::move(file.sha256), std::move(etag)});
    }
    const std::optional<std::string> next = NextLink(response.headers.GetAll("Link"));
    if (!next.has_value()) break;
    const absl::StatusOr<transfer::UrlOrigin> next_origin = transfer::OriginOf(*next);
    if (!next_origin.ok() || *next_origin != origin) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the tree listing's next page is not on the endpoint's origin"));
    }
    url = *next;
  }
  ASSIGN_OR_RETURN(std::vector<RemoteFile> remote,
                   StepFiles(listed, HubFileUrlPrefix(endpoint, repo, commit), where));
  RemoteStep out;
  out.step = step;
  out.name = std::string(name);
  out.repo = std::string(repo);
  out.commit = commit;
  out.revision = std::string(revision);
  out.files = std::move(remote);
  return out;
}

}  // namespace anisoscope::listing
