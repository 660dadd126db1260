// SourceAudit: the one core of JobService.AuditSource (issue 38 item 5), called by the gRPC
// and HTTP adapters as they call JobSubmission::Submit:
//
//   SourceAudit audit(store, server_files, lister);            // none owned
//   absl::StatusOr<v1::AuditSourceResponse> r = audit.Audit(request, ns, actor);
//
// A remote source (request.source) is checked against the server's --allow-source and then
// the namespace's sources (PERMISSION_DENIED naming the source and the flag), then listed by
// the server (SourceLister: refs, trees, model searches, S3 lists; no weight byte is read):
// each step with its files, sizes, sha256, commit and duplicate_of (from the listing's
// DuplicateGroups), the names without a step, the problems, `requests` (listing GETs) and
// `seconds`. A folder (request.checkpoints_dir) is read through the namespace's file gate
// (PERMISSION_DENIED outside its roots) with the steps found as a submit finds them, each
// with its files' sizes: no weight byte is read, so no hashes and no duplicates.
// INVALID_ARGUMENT naming the field for neither or both of source and checkpoints_dir, or a
// malformed source. The listing's own errors (UNAUTHENTICATED, NOT_FOUND, ...) pass through,
// naming the repo or bucket, never a secret.
//
// Thread-safe (const; the lister's clients are); Audit blocks on network, file-system and
// SQLite I/O, bounded by the lister's ListingBounds.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/file_gate.h"
#include "server/sources/source_lister.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class SourceAudit {
 public:
  // None owned; each must outlive the audit. `server_files`: the server's roots; `lister`:
  // the server's endpoints, clients and --allow-source.
  SourceAudit(storage::MetricsStore* store, const FileGate* server_files,
              const SourceLister* lister)
      : store_(store), server_files_(server_files), lister_(lister) {}

  // Audits `request` for a caller of namespace `ns` (`actor` names the caller in logs only).
  absl::StatusOr<::anisoscope::v1::AuditSourceResponse> Audit(
      const ::anisoscope::v1::AuditSourceRequest& request, const std::string& ns,
      const std::string& actor) const;

 private:
  storage::MetricsStore* const store_;
  const FileGate* const server_files_;
  const SourceLister* const lister_;
};

}  // namespace anisoscope::server
