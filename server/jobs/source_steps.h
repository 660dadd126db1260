// From a remote source to a job's checkpoints (issue 38): the path a submit and an audit take
// to list a source (the server's and the namespace's allow-lists checked first, then
// SourceLister; a followed source's poll makes the same two calls itself, to tell a refusal,
// which ends the job, from a listing's own error, which is retried), and the one place a
// listing becomes checkpoints:
//  - each listed step a pending checkpoint whose path displays it ("hub:ORG/NAME@step1000",
//    "s3://BUCKET/PREFIX/step1000/"; nothing opens it) carrying its v1.RemoteCheckpoint as
//    opaque bytes (the store keeps them; the lease sends them as WorkUnit.remote);
//  - with dedupe, every step of a DuplicateGroup after the first is stored skipped, its
//    duplicate_of the first's step: it is never downloaded (unless the first fails: then
//    JobRegistry puts it back to pending);
//  - each carries its revision and commit as text too (shown without parsing the bytes);
//  - a step whose descriptor serializes past kMaxRemoteCheckpointBytes is a failed checkpoint
//    naming the step and the bound, without its descriptor;
//  - a step the listing names but cannot use (missing revision, no weights, a hostile name)
//    is a failed checkpoint with the listing's reason, so that the job shows it and the
//    other steps run (a followed source leaves it for a later poll instead: it may be
//    still being written).
// Thread-safe; ListAllowedSource blocks on SQLite and the network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/sources/source_allow_list.h"
#include "server/sources/source_lister.h"
#include "sources/listing/remote_listing.h"
#include "storage/metrics_store.h"
#include "storage/types.h"

namespace anisoscope::server {

// Namespace `ns`'s own sources (`namespaces set NS --allow-source`), parsed; empty when it has
// none (the server's apply alone). DATA_LOSS naming the namespace for a stored entry that no
// longer parses.
absl::StatusOr<SourceAllowList> NamespaceSources(storage::MetricsStore& store,
                                                 const std::string& ns);

// `source` checked (SourceLister::Check with `ns`'s sources) and listed. The listing's errors
// pass through (they name the repo or bucket).
absl::StatusOr<listing::SourceListing> ListAllowedSource(
    const SourceLister& lister, storage::MetricsStore& store, const std::string& ns,
    const ::anisoscope::v1::CheckpointSource& source);

// The checkpoints `listing` of `source` gives a job, ascending by step: those whose step is
// not in `known` and not past `until_step`. `follow`: problems are left out (retried at the
// next poll) rather than failed checkpoints.
std::vector<storage::CheckpointSpec> CheckpointsFromListing(
    const listing::SourceListing& listing, const ::anisoscope::v1::CheckpointSource& source,
    bool dedupe, bool follow, const std::set<int64_t>& known, std::optional<int64_t> until_step);

// The largest serialized v1.RemoteCheckpoint a listed step may have; past it the step is a
// failed checkpoint. Why 4 MiB: a WorkUnit carries its step's descriptor and may carry the
// next one's (Reserve drops that past half of kMaxMessageBytes, 64 MiB), every listing of the
// job's checkpoints and every stored row carries it too, and 4 MiB is some 20,000 files'
// names, sizes and hashes: far past any real checkpoint's few hundred shards.
inline constexpr size_t kMaxRemoteCheckpointBytes = size_t{4} << 20;

// A skipped duplicate's reason, as its checkpoint's error says it.
std::string ListedDuplicateReason(int64_t duplicate_of);

// The one reading of a listing's DuplicateGroups (for submits, follows and audits): for each
// step listed after its group's first member, its name -> the first member's step. Only
// steps of `listing.steps` count, and only an earlier first (a group is in step order).
std::map<std::string, int64_t> ListedDuplicateOf(const listing::SourceListing& listing);

}  // namespace anisoscope::server
