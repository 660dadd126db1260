#include "server/jobs/worker_socket.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

namespace anisoscope::server {

absl::StatusOr<std::unique_ptr<WorkerSocket>> WorkerSocket::Create() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                     "/anisoscope-workers-XXXXXX");
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (mkdtemp(name.data()) == nullptr) {  // mode 0700
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot make a private directory for the embedded workers' socket (", pattern,
        "): ", std::strerror(errno), "; set TMPDIR to a writable directory"));
  }
  const std::string dir = name.data();
  return std::unique_ptr<WorkerSocket>(new WorkerSocket(dir, dir + "/socket"));
}

WorkerSocket::~WorkerSocket() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
  std::filesystem::remove(dir_, ignored);
}

}  // namespace anisoscope::server
