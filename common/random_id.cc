#include "common/random_id.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace anisoscope {

std::string RandomId128() {
  std::random_device device;  // one per call: an instance is not safe to share across threads
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::Hex(device(), absl::kZeroPad8));
  return id;
}

}  // namespace anisoscope
