#include "server/http/query_params.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_text.h"

namespace anisoscope::server {

namespace protobuf = ::google::protobuf;

namespace {

// "ALARM_STATE_" for enum AlarmState: the prefix its values' names share.
std::string ShortEnumPrefix(const protobuf::EnumDescriptor& type) {
  std::string prefix;
  for (const char c : type.name()) {
    if (absl::ascii_isupper(c) && !prefix.empty()) prefix.push_back('_');
    prefix.push_back(absl::ascii_toupper(c));
  }
  return prefix + "_";
}

}  // namespace

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
    // One of a oneof: a second would silently replace the first.
    if (const protobuf::OneofDescriptor* oneof = field->containing_oneof();
        oneof != nullptr && !oneof->is_synthetic()) {
      if (const protobuf::FieldDescriptor* set =
              message->GetReflection()->GetOneofFieldDescriptor(*message, oneof);
          set != nullptr && set != field) {
        return absl::InvalidArgumentError(absl::StrCat("parameters '", set->name(), "' and '",
                                                       field->name(), "' exclude each other"));
      }
    }
    std::string literal = JsonQuote(value);
    if (field->cpp_type() == protobuf::FieldDescriptor::CPPTYPE_BOOL) {
      if (value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", name, "' wants true or false, got '", value, "'"));
      }
      literal = value;
    }
    if (field->cpp_type() == protobuf::FieldDescriptor::CPPTYPE_ENUM) {
      // A value's short name too: state=firing for ALARM_STATE_FIRING.
      const protobuf::EnumDescriptor* type = field->enum_type();
      for (int i = 0; i < type->value_count(); ++i) {
        const std::string& full = type->value(i)->name();
        if (absl::EqualsIgnoreCase(absl::StrCat(ShortEnumPrefix(*type), value), full)) {
          literal = JsonQuote(full);
        }
      }
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
