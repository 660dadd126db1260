#include "common/process_memory.h"

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace anisoscope {
namespace {

// The "FIELD:   N kB" line of /proc/self/status, in bytes; 0 when absent.
uint64_t StatusBytes(absl::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, field) || line.size() <= field.size() ||
        line[field.size()] != ':') {
      continue;
    }
    absl::string_view value =
        absl::StripAsciiWhitespace(absl::string_view(line).substr(field.size() + 1));
    absl::ConsumeSuffix(&value, "kB");
    uint64_t kilobytes = 0;
    return absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &kilobytes) ? kilobytes << 10 : 0;
  }
  return 0;
}

}  // namespace

uint64_t DataSegmentBytes() { return StatusBytes("VmData"); }
uint64_t PeakResidentBytes() { return StatusBytes("VmHWM"); }

bool ResetPeakResident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}
uint64_t AnonymousResidentBytes() { return StatusBytes("RssAnon"); }

}  // namespace anisoscope
