#include "sources/cache/node_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/random_id.h"
#include "sources/cache/process_owner.h"

namespace anisoscope::cache {
namespace {

std::optional<std::string> ReadSmall(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(256, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

bool WriteNew(const std::filesystem::path& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok) unlink(path.c_str());
  return ok;
}

absl::Duration AgeOf(const std::filesystem::path& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return absl::ZeroDuration();
  return absl::Now() - absl::TimeFromTimespec(st.st_mtim);
}

// The owner a lock file's content names ("TOKEN RANDOM").
std::optional<ProcessOwner> OwnerOf(const std::string& content) {
  const std::vector<absl::string_view> parts = absl::StrSplit(content, ' ');
  return ProcessOwner::Parse(parts.front());
}

}  // namespace

absl::Status NodeLock::Lock() {
  if (held()) return absl::FailedPreconditionError("cache lock: already held by this object");
  const std::string token = absl::StrCat(ProcessOwner::Self().Token(), " ", RandomId128());
  const std::filesystem::path mine =
      absl::StrCat(path_.string(), ".", RandomId128().substr(0, 16), ".tmp");
  if (!WriteNew(mine, token)) {
    return absl::InternalError(absl::StrCat("cache lock ", path_.string(), ": cannot write ",
                                            mine.string(), ": ", std::strerror(errno)));
  }
  const auto deadline = absl::Now() + timeout_;
  absl::Duration pause = absl::Milliseconds(1);
  std::string last_seen;
  while (true) {
    if (link(mine.c_str(), path_.c_str()) == 0) {
      unlink(mine.c_str());
      token_ = token;
      return absl::OkStatus();
    }
    if (errno != EEXIST) {
      const int error = errno;
      unlink(mine.c_str());
      return absl::InternalError(
          absl::StrCat("cache lock ", path_.string(), ": ", std::strerror(error)));
    }
    std::optional<std::string> seen = ReadSmall(path_);
    if (seen.has_value()) {
      last_seen = *seen;
      const std::optional<ProcessOwner> owner = OwnerOf(*seen);
      const bool dead = owner.has_value() ? !owner->MaybeAlive() : false;
      if (dead || AgeOf(path_) > stale_after_) BreakIfStill(*seen);
    }
    if (absl::Now() > deadline) {
      unlink(mine.c_str());
      const std::optional<ProcessOwner> owner = OwnerOf(last_seen);
      return absl::UnavailableError(absl::StrCat(
          "cache lock ", path_.string(), ": still held after ", absl::FormatDuration(timeout_),
          " by ", owner.has_value() ? owner->Token() : std::string("an unknown owner")));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(pause));
    pause = std::min(pause * 2, absl::Milliseconds(20));
  }
}

void NodeLock::Unlock() {
  if (!held()) return;
  // Only our own acquisition is removed: had a breaker taken it (we were presumed dead),
  // the file now belongs to another holder.
  if (ReadSmall(path_) == std::optional<std::string>(token_)) unlink(path_.c_str());
  token_.clear();
}

void NodeLock::BreakIfStill(const std::string& seen) {
  const std::filesystem::path breaker = path_.string() + ".break";
  const std::string mine = absl::StrCat(ProcessOwner::Self().Token(), " ", RandomId128());
  if (!WriteNew(breaker, mine)) {
    const int error = errno;
    // Another breaker is at work; its file is stale when it died inside its few calls.
    const std::optional<std::string> other = ReadSmall(breaker);
    if (error == EEXIST && other.has_value()) {
      const std::optional<ProcessOwner> owner = OwnerOf(*other);
      const bool dead = owner.has_value() && !owner->MaybeAlive();
      if ((dead || AgeOf(breaker) > stale_after_) && ReadSmall(breaker) == other) {
        unlink(breaker.c_str());
      }
    }
    return;
  }
  if (ReadSmall(path_) == std::optional<std::string>(seen)) unlink(path_.c_str());
  if (ReadSmall(breaker) == std::optional<std::string>(mine)) unlink(breaker.c_str());
}

}  // namespace anisoscope::cache
