#include "sources/listing/hub_json.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::listing {
namespace {

using nlohmann::json;

absl::StatusOr<json> Parse(absl::string_view body, absl::string_view where) {
  json value = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the answer is not JSON"));
  }
  return value;
}

absl::Status Malformed(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": malformed answer: ", what));
}

bool StringField(const json& object, const char* name, std::string* out) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

bool SizeField(const json& object, const char* name, uint64_t* out) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_number_unsigned()) return false;
  *out = it->get<uint64_t>();
  return true;
}

}  // namespace

absl::StatusOr<std::vector<HubBranch>> ParseHubRefs(absl::string_view body,
                                                    absl::string_view where) {
  absl::StatusOr<json> value = Parse(body, where);
  if (!value.ok()) return value.status();
  if (!value->is_object()) return Malformed(where, "refs is not an object");
  const auto branches = value->find("branches");
  if (branches == value->end() || !branches->is_array()) {
    return Malformed(where, "no \"branches\" array");
  }
  std::vector<HubBranch> out;
  for (const json& branch : *branches) {
    HubBranch item;
    if (!branch.is_object() || !StringField(branch, "name", &item.name) ||
        !StringField(branch, "targetCommit", &item.commit)) {
      return Malformed(where, "a branch without a name or targetCommit");
    }
    out.push_back(std::move(item));
  }
  return out;
}

absl::StatusOr<std::vector<HubTreeFile>> ParseHubTreePage(absl::string_view body,
                                                          absl::string_view where) {
  absl::StatusOr<json> value = Parse(body, where);
  if (!value.ok()) return value.status();
  if (!value->is_array()) return Malformed(where, "a tree page is not an array");
  std::vector<HubTreeFile> out;
  for (const json& entry : *value) {
    std::string type;
    if (!entry.is_object() || !StringField(entry, "type", &type)) {
      return Malformed(where, "an entry without a type");
    }
    if (type == "directory") continue;
    if (type != "file") return Malformed(where, "an entry that is neither file nor directory");
    HubTreeFile file;
    if (!StringField(entry, "path", &file.path) || !StringField(entry, "oid", &file.oid) ||
        !SizeField(entry, "size", &file.size)) {
      return Malformed(where, "a file without path, oid or size");
    }
    const auto lfs = entry.find("lfs");
    if (lfs != entry.end() && !lfs->is_null()) {
      if (!lfs->is_object() || !StringField(*lfs, "oid", &file.sha256) ||
          !SizeField(*lfs, "size", &file.size)) {
        return Malformed(where, "an LFS file without oid or size");
      }
    }
    out.push_back(std::move(file));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ParseHubModelIds(absl::string_view body,
                                                          absl::string_view where) {
  absl::StatusOr<json> value = Parse(body, where);
  if (!value.ok()) return value.status();
  if (!value->is_array()) return Malformed(where, "a model list is not an array");
  std::vector<std::string> ids;
  for (const json& model : *value) {
    std::string id;
    if (!model.is_object() || !StringField(model, "id", &id)) {
      return Malformed(where, "a model without an id");
    }
    ids.push_back(std::move(id));
  }
  return ids;
}

}  // namespace anisoscope::listing
