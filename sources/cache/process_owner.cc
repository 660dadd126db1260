#include "sources/cache/process_owner.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace anisoscope::cache {
namespace {

std::string ThisHost() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string host = name;
  for (char& c : host) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-';
    if (!plain) c = '_';
  }
  return host.empty() ? "localhost" : host;
}

// Field 22 of /proc/PID/stat (after the parenthesised command, which may hold spaces).
uint64_t StartTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  // Fields 3.. follow the command; the start time is the 20th of them.
  for (int i = 3; i <= 22 && (rest >> field); ++i) {
    if (i == 22) {
      uint64_t ticks = 0;
      return absl::SimpleAtoi(field, &ticks) ? ticks : 0;
    }
  }
  return 0;
}

}  // namespace

ProcessOwner ProcessOwner::Self() {
  const pid_t pid = getpid();
  return ProcessOwner{ThisHost(), pid, StartTicks(pid)};
}

std::optional<ProcessOwner> ProcessOwner::Parse(absl::string_view token) {
  const std::vector<absl::string_view> parts = absl::StrSplit(token, '~');
  if (parts.size() != 3 || parts[0].empty()) return std::nullopt;
  int pid = 0;
  uint64_t ticks = 0;
  if (!absl::SimpleAtoi(parts[1], &pid) || pid <= 0 || !absl::SimpleAtoi(parts[2], &ticks)) {
    return std::nullopt;
  }
  return ProcessOwner{std::string(parts[0]), static_cast<pid_t>(pid), ticks};
}

std::string ProcessOwner::Token() const { return absl::StrCat(host, "~", pid, "~", start_ticks); }

bool ProcessOwner::MaybeAlive() const {
  if (host != ThisHost()) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const uint64_t now = StartTicks(pid);
  // Unreadable /proc (another mount namespace): the pid's existence is all we know.
  return now == 0 || start_ticks == 0 || now == start_ticks;
}

}  // namespace anisoscope::cache
