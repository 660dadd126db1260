#include "sources/listing/duplicates.h"

#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sources/listing/checkpoint_files.h"

namespace anisoscope::listing {
namespace {

bool IsHex(const std::string& text, size_t length) {
  if (text.size() != length) return false;
  for (const char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> ContentKey(const RemoteFile& file, bool s3) {
  if (s3) {
    if (!IsHex(file.etag, 32)) return std::nullopt;  // multipart or unknown
    return absl::StrCat("md5:", absl::AsciiStrToLower(file.etag), ":", file.size);
  }
  if (IsHex(file.sha256, 64)) return absl::StrCat("sha256:", absl::AsciiStrToLower(file.sha256));
  if (IsHex(file.etag, 40) || IsHex(file.etag, 64)) {
    return absl::StrCat("git:", absl::AsciiStrToLower(file.etag));
  }
  return std::nullopt;
}

std::vector<DuplicateGroup> FindDuplicates(const std::vector<RemoteStep>& steps, bool s3) {
  std::map<std::string, DuplicateGroup> by_weights;
  std::vector<std::string> order;
  for (const RemoteStep& step : steps) {
    std::set<std::string> keys;
    bool known = true;
    for (const RemoteFile& file : step.files) {
      if (!IsWeightFile(file.path)) continue;
      std::optional<std::string> key = ContentKey(file, s3);
      if (!key.has_value()) {
        known = false;
        break;
      }
      keys.insert(*std::move(key));
    }
    if (!known || keys.empty()) continue;
    const std::string signature = absl::StrJoin(keys, ",");
    auto [it, inserted] = by_weights.try_emplace(signature);
    if (inserted) order.push_back(signature);
    it->second.names.push_back(step.name);
  }
  std::vector<DuplicateGroup> groups;
  for (const std::string& signature : order) {
    DuplicateGroup& group = by_weights[signature];
    if (group.names.size() > 1) groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace anisoscope::listing
