// Who holds a lock, a pin or a reservation of the source cache: host, pid and the process's
// start time (so that a pid reused by a later process is not taken for the dead owner), as
// one file-name-safe token "HOST~PID~START". Only an owner on this host can be checked;
// one on another host is presumed alive. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace anisoscope::cache {

struct ProcessOwner {
  std::string host;  // gethostname, with anything outside [A-Za-z0-9.-] as '_'
  pid_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/PID/stat field 22 (0 when unreadable)

  // This process (the pid read now: a forked child gets its own).
  static ProcessOwner Self();
  // The owner a Token() names, or nullopt for anything else (a foreign file name).
  static std::optional<ProcessOwner> Parse(absl::string_view token);

  std::string Token() const;
  // False only when the owner is on this host and its pid is gone or now belongs to a
  // process started at another time.
  bool MaybeAlive() const;
};

}  // namespace anisoscope::cache
