// Whether a job or step state is final (no other state follows it), read from the
// `final_state` option of the proto enums: the one home of that fact, also read by the Python
// client (anisoscope.records).
#pragma once

#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::v1 {

inline bool IsFinal(JobState state) {
  const google::protobuf::EnumValueDescriptor* value =
      JobState_descriptor()->FindValueByNumber(state);
  return value != nullptr && value->options().GetExtension(final_state);
}

inline bool IsFinal(StepState state) {
  const google::protobuf::EnumValueDescriptor* value =
      StepState_descriptor()->FindValueByNumber(state);
  return value != nullptr && value->options().GetExtension(final_state);
}

}  // namespace anisoscope::v1
