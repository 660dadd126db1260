// What a download reports as it goes: the worker's progress lines and the dashboard's
// bytes/s come from here.
#pragma once

#include <cstdint>
#include <optional>

namespace anisoscope::transfer {

struct DownloadProgress {
  int64_t bytes = 0;             // in the file so far (resumed bytes included)
  std::optional<int64_t> total;  // the expected size, when given
  double bytes_per_second = 0;   // fetched by this call, over its time so far
};

}  // namespace anisoscope::transfer
