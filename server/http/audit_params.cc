#include "server/http/audit_params.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http/query_params.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

absl::Status AuditRequestFromParams(const std::multimap<std::string, std::string>& params,
                                    pb::AuditSourceRequest* request) {
  const google::protobuf::Descriptor* source_fields = pb::CheckpointSource::descriptor();
  std::multimap<std::string, std::string> of_request, of_source;
  const std::string* revisions = nullptr;
  for (const auto& entry : params) {
    const auto& [name, value] = entry;
    const google::protobuf::FieldDescriptor* field = source_fields->FindFieldByName(name);
    if (field == nullptr) field = source_fields->FindFieldByCamelcaseName(name);
    if (field == nullptr) {
      of_request.insert(entry);
    } else if (field->name() == "revisions") {
      if (revisions != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "' is given twice"));
      }
      revisions = &value;
    } else {
      of_source.insert(entry);
    }
  }
  // The request's own fields (checkpoints_dir); `source` cannot be named as a whole.
  if (absl::Status status = MessageFromParams(of_request, request); !status.ok()) return status;
  pb::CheckpointSource source;
  if (absl::Status status = MessageFromParams(of_source, &source); !status.ok()) return status;
  if (revisions != nullptr && !revisions->empty()) {
    for (absl::string_view revision : absl::StrSplit(*revisions, ',')) {
      if (revision.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("parameter 'revisions': an empty name in '",
                                                       *revisions, "' (comma-separated)"));
      }
      source.add_revisions(std::string(revision));
    }
  }
  if (source.ByteSizeLong() > 0) *request->mutable_source() = std::move(source);
  return absl::OkStatus();
}

}  // namespace anisoscope::server
