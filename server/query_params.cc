#include "server/query_params.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"

namespace anisoscope::server {

namespace protobuf = ::google::protobuf;

absl::Status MessageFromParams(const std::multimap<std::string, std::string>& params,
                               protobuf::Message* message) {
  const protobuf::Descriptor* descriptor = message->GetDescriptor();
  std::set<const protobuf::FieldDescriptor*> seen;
  for (const auto& [name, value] : params) {
    const protobuf::FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field == nullptr) field = descriptor->FindFieldByCamelcaseName(name);
    if (field == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown parameter '", name, "'"));
    }
    if (field->is_repeated() || field->cpp_type() == protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", name, "' cannot be given in a query string"));
    }
    if (!seen.insert(field).second) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "' is given twice"));
    }
    if (value.empty()) continue;
    std::string literal = JsonQuote(value);
    if (field->cpp_type() == protobuf::FieldDescriptor::CPPTYPE_BOOL) {
      if (value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", name, "' wants true or false, got '", value, "'"));
      }
      literal = value;
    }
    // One field at a time, so that a bad value names its parameter.
    const std::string one = absl::StrCat("{", JsonQuote(field->json_name()), ":", literal, "}");
    std::unique_ptr<protobuf::Message> parsed(message->New());
    const auto status = protobuf::util::JsonStringToMessage(one, parsed.get());
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "': invalid value '",
                                                     value, "' for a ", field->type_name(),
                                                     " field"));
    }
    message->MergeFrom(*parsed);
  }
  return absl::OkStatus();
}

}  // namespace anisoscope::server
