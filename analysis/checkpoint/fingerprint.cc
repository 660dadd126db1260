#include "analysis/checkpoint/fingerprint.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr char kPrefix[] = "xxh3-128:";
constexpr size_t kHexDigits = 32;

// Buffered reads: a fresh mapping of a file would fault in every page (about 1.3 GB/s
// here, for 10 and more of XXH3 on data in memory).
constexpr size_t kChunkBytes = size_t{4} << 20;

absl::Status HashFile(const std::filesystem::path& file, const FileGate& gate, XXH3_state_t* state,
                      std::vector<char>& buffer) {
  ASSIGN_OR_RETURN(const UniqueFd opened, gate.OpenFile(file));
  const int fd = opened.get();
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  uint64_t size = 0;
  absl::Status status;
  while (true) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      status = absl::InvalidArgumentError(
          absl::StrCat(file.string(), ": cannot read: ", std::strerror(errno)));
      break;
    }
    if (got == 0) break;
    XXH3_128bits_update(state, buffer.data(), static_cast<size_t>(got));
    size += static_cast<uint64_t>(got);
  }
  // The length after the bytes: files ["ab", "c"] and ["a", "bc"] differ.
  if (status.ok()) XXH3_128bits_update(state, &size, sizeof size);
  return status;
}

}  // namespace

absl::StatusOr<std::string> FingerprintFiles(const std::vector<std::filesystem::path>& files,
                                             const FileGate& gate) {
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                       &XXH3_freeState);
  if (state == nullptr || XXH3_128bits_reset(state.get()) != XXH_OK) {
    return absl::ResourceExhaustedError("cannot allocate a hash state");
  }
  std::vector<char> buffer(kChunkBytes);
  for (const std::filesystem::path& file : files) {
    RETURN_IF_ERROR(HashFile(file, gate, state.get(), buffer));
  }
  const XXH128_hash_t hash = XXH3_128bits_digest(state.get());
  char hex[kHexDigits + 1];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return absl::StrCat(kPrefix, hex);
}

bool IsFingerprint(std::string_view text) {
  const std::string_view prefix = kPrefix;
  if (text.size() != prefix.size() + kHexDigits || text.substr(0, prefix.size()) != prefix) {
    return false;
  }
  return std::all_of(text.begin() + prefix.size(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace anisoscope::analysis
