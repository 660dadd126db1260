// SourceAllowList: which remote series may be read (issue 38 item 7), the sources' analogue of
// --allow-root: the server's --allow-source entries, and a namespace's own (`namespaces set NS
// --allow-source ...`), which narrow the server's (a source must pass both; a namespace with
// none has the server's). Entries:
//   hub:ORG/NAME        that Hub repo (also a --hub-repos pattern written as the entry)
//   hub:ORG/*           every repo of ORG (so every --hub-repos pattern under ORG)
//   s3://BUCKET/PREFIX/ every folder under PREFIX, matched on whole '/'-segments
//   s3://BUCKET/        the whole bucket
// An empty list allows no remote source: a server without --allow-source reads only folders.
// Immutable after Parse; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::server {

class SourceAllowList {
 public:
  SourceAllowList() = default;  // empty: nothing allowed

  // The entries of flag `flag` ("--allow-source"), normalized (an "s3://BUCKET" gets its '/').
  // INVALID_ARGUMENT naming the flag and the entry for one that is malformed.
  static absl::StatusOr<SourceAllowList> Parse(const std::vector<std::string>& entries,
                                               absl::string_view flag = "--allow-source");

  // OK when an entry allows `source` (one kind set, already validated by SourceLister);
  // PERMISSION_DENIED naming the source (described) and `flag` otherwise, also when empty.
  absl::Status Check(const ::anisoscope::v1::CheckpointSource& source,
                     absl::string_view flag = "--allow-source") const;

  bool empty() const { return entries_.empty(); }
  // As normalized by Parse, in the order given.
  const std::vector<std::string>& entries() const { return entries_; }

 private:
  struct Entry {
    enum class Kind { kHubRepo, kHubOrg, kS3 };
    Kind kind = Kind::kHubRepo;
    std::string repo;    // kHubRepo: ORG/NAME (or a pattern); kHubOrg: ORG; kS3: the bucket
    std::string prefix;  // kS3: "" or ending in '/'
  };
  bool Allows(const ::anisoscope::v1::CheckpointSource& source) const;

  std::vector<std::string> entries_;
  std::vector<Entry> parsed_;
};

}  // namespace anisoscope::server
