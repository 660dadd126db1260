#include "common/path_policy.h"

#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace anisoscope {
namespace {

bool IsWithin(const std::filesystem::path& path, const std::filesystem::path& root) {
  auto root_it = root.begin();
  auto path_it = path.begin();
  for (; root_it != root.end(); ++root_it, ++path_it) {
    if (root_it->empty()) continue;  // trailing separator of the root
    if (path_it == path.end() || *path_it != *root_it) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PathPolicy>> PathPolicy::Create(const Options& options) {
  std::vector<std::filesystem::path> roots;
  for (const std::string& root : options.allowed_roots) {
    std::error_code error;
    std::filesystem::path canonical = std::filesystem::canonical(root, error);
    if (error || !std::filesystem::is_directory(canonical)) {
      return absl::InvalidArgumentError(
          absl::StrCat("allowed root '", root, "' is not an existing directory"));
    }
    roots.push_back(canonical);
  }
  return std::unique_ptr<PathPolicy>(new PathPolicy(std::move(roots)));
}

absl::StatusOr<std::filesystem::path> PathPolicy::Resolve(const std::string& path,
                                                          const std::string& what) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " path is empty"));
  if (!std::filesystem::path(path).is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " path '", path, "' must be absolute (it is read on the server)"));
  }
  std::error_code error;
  std::filesystem::path canonical = std::filesystem::canonical(path, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat(what, " '", path, "' does not exist"));
  }
  for (const std::filesystem::path& root : roots_) {
    if (IsWithin(canonical, root)) return canonical;
  }
  return absl::PermissionDeniedError(absl::StrCat(what, " '", path, "' resolves to '",
                                                  canonical.string(),
                                                  "', which is outside every --allow-root"));
}

}  // namespace anisoscope
