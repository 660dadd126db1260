#include "sources/listing/listing_fetcher.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::listing {

ListingFetcher::ListingFetcher(transfer::HttpClient& client, ListingBounds bounds)
    : client_(client), bounds_(bounds), start_(client.counters()) {}

absl::StatusOr<transfer::HttpResponse> ListingFetcher::GetPage(const std::string& url,
                                                               absl::string_view accept,
                                                               absl::string_view where) {
  ++requests_;
  transfer::GetRequest request;
  request.url = url;
  request.max_body_bytes = bounds_.max_page_bytes;
  request.headers.push_back(absl::StrCat("Accept: ", accept));
  absl::StatusOr<transfer::HttpResponse> response = client_.Get(request);
  if (!response.ok()) return Annotate(response.status(), where);
  return response;
}

ListingCounters ListingFetcher::counters() const {
  ListingCounters out;
  out.requests = requests_.load();
  out.pages = out.requests;
  const transfer::TransferCounters now = client_.counters();
  out.transfer.attempts = now.attempts - start_.attempts;
  out.transfer.retries = now.retries - start_.retries;
  out.transfer.redirects = now.redirects - start_.redirects;
  out.transfer.bytes_fetched = now.bytes_fetched - start_.bytes_fetched;
  return out;
}

absl::Status Annotate(const absl::Status& status, absl::string_view where) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(where, ": ", status.message()));
  status.ForEachPayload([&out](absl::string_view type_url, const absl::Cord& payload) {
    out.SetPayload(type_url, payload);
  });
  return out;
}

absl::Status CheckStepCount(int64_t steps, const ListingBounds& bounds, absl::string_view where) {
  if (steps <= bounds.max_steps) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(where, ": ", steps, " steps, more than ",
                                                   bounds.max_steps,
                                                   " (ListingBounds::max_steps)"));
}

absl::Status CheckTotalFiles(const SourceListing& listing, const ListingBounds& bounds,
                             absl::string_view where) {
  int64_t files = 0;
  for (const RemoteStep& step : listing.steps) files += static_cast<int64_t>(step.files.size());
  if (files <= bounds.max_total_files) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(where, ": ", files, " files over its steps, more than ",
                   bounds.max_total_files, " (ListingBounds::max_total_files)"));
}

bool IsStepProblem(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kOutOfRange:
      return true;
    default:
      return false;
  }
}

}  // namespace anisoscope::listing
