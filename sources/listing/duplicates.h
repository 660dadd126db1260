// Steps that hold the same weights under two names (EleutherAI/pythia #205: 76 of 154
// pythia-2.8b branches are byte-identical to main), found from the listing alone.
//
// Two steps are duplicates when their weight files (checkpoint_files.h: IsWeightFile) have
// the same set of content hashes, whatever the files are called:
//  - Hub: an LFS file's sha256 (lfs.oid), else its git blob oid (a hash of its bytes too);
//  - S3: the ETag with the size, but only when the ETag is an MD5 of the bytes, which S3
//    gives for a single-part upload (32 hex digits). A multipart ETag ("<hex>-<parts>")
//    depends on the part size the uploader chose, not only on the bytes, so a step with one
//    is never called a duplicate (a false "different" rather than a false "same").
// A step without weight files, or with one whose hash is unknown, is in no group.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sources/listing/remote_listing.h"

namespace anisoscope::listing {

// The content key of one file ("sha256:<hex>", "git:<oid>", "md5:<hex>:<size>"); nullopt
// when its bytes are not identified by what the listing says.
std::optional<std::string> ContentKey(const RemoteFile& file, bool s3);

// The groups of duplicate steps among `steps` (sorted by step), each in step order, ordered
// by their first step.
std::vector<DuplicateGroup> FindDuplicates(const std::vector<RemoteStep>& steps, bool s3);

}  // namespace anisoscope::listing
