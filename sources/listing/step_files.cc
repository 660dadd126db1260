#include "sources/listing/step_files.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sources/listing/checkpoint_files.h"
#include "sources/listing/listing_paths.h"

namespace anisoscope::listing {

absl::StatusOr<std::vector<RemoteFile>> StepFiles(const std::vector<ListedFile>& listed,
                                                  absl::string_view url_prefix,
                                                  absl::string_view where) {
  std::set<std::string> seen;
  std::vector<RemoteFile> files;
  bool has_weights = false;
  for (const ListedFile& entry : listed) {
    RETURN_IF_ERROR(CheckListedPath(entry.path, where));
    if (!seen.insert(entry.path).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": file name '", absl::CHexEscape(entry.path), "' is listed twice"));
    }
    if (!IsCheckpointFile(entry.path)) continue;
    has_weights = has_weights || IsWeightFile(entry.path);
    files.push_back({entry.path, entry.size, entry.sha256, entry.etag,
                     absl::StrCat(url_prefix, PercentEncode(entry.path, /*keep_slash=*/true))});
  }
  if (!has_weights) {
    return absl::NotFoundError(
        absl::StrCat(where, ": no weight file (*.safetensors or pytorch_model*.bin) is listed"));
  }
  std::sort(files.begin(), files.end(),
            [](const RemoteFile& a, const RemoteFile& b) { return a.path < b.path; });
  return files;
}

}  // namespace anisoscope::listing
