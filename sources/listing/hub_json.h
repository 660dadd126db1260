// The Hub API's JSON answers a listing reads, as huggingface_hub's hf_api.py reads them
// (list_repo_refs: GitRefs; list_repo_tree: RepoFile / RepoFolder; list_models: ModelInfo).
// Parsed with nlohmann::json without exceptions; a field of the wrong type, or a body that
// is not JSON, is INVALID_ARGUMENT naming `where` (never quoting the body). Pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anisoscope::listing {

// GET /api/models/{repo}/refs: {"branches": [{"name", "ref", "targetCommit"}], "tags",
// "converts"}. Only branches are steps (tags and PR refs are not).
struct HubBranch {
  std::string name;
  std::string commit;  // targetCommit: 40 hex digits
};
absl::StatusOr<std::vector<HubBranch>> ParseHubRefs(absl::string_view body,
                                                    absl::string_view where);

// One page of GET /api/models/{repo}/tree/{rev}?recursive=true: [{"type": "file" |
// "directory", "path", "size", "oid", "lfs": {"oid", "size", "pointerSize"}}]. Directories
// are dropped (a recursive listing names their files).
struct HubTreeFile {
  std::string path;
  uint64_t size = 0;   // lfs.size for an LFS file, else size
  std::string oid;     // the git blob oid
  std::string sha256;  // lfs.oid; empty when not LFS
};
absl::StatusOr<std::vector<HubTreeFile>> ParseHubTreePage(absl::string_view body,
                                                          absl::string_view where);

// One page of GET /api/models?author=&search=: [{"id": "ORG/NAME", ...}] -> the ids.
absl::StatusOr<std::vector<std::string>> ParseHubModelIds(absl::string_view body,
                                                          absl::string_view where);

}  // namespace anisoscope::listing
