#include "analysis/checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::analysis {

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::filesystem::path& file) {
  // O_NONBLOCK: a FIFO in a weights file's place must not block the open (no effect on files).
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat(file.string(), ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": not a regular file"));
  }
  auto mapped = std::shared_ptr<MappedFile>(new MappedFile());
  mapped->size_ = static_cast<uint64_t>(st.st_size);
  if (mapped->size_ > 0) {
    void* data = ::mmap(nullptr, mapped->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(file.string(), ": cannot mmap: ", std::strerror(err)));
    }
    mapped->data_ = static_cast<uint8_t*>(data);
  }
  ::close(fd);
  return mapped;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace anisoscope::analysis
