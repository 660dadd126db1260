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

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::filesystem::path& file,
                                                             const FileGate& gate) {
  absl::StatusOr<UniqueFd> opened = gate.OpenFile(file);
  if (!opened.ok()) return opened.status();
  const int fd = opened->get();
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": cannot stat"));
  }
  auto mapped = std::shared_ptr<MappedFile>(new MappedFile());
  mapped->size_ = static_cast<uint64_t>(st.st_size);
  if (mapped->size_ > 0) {
    void* data = ::mmap(nullptr, mapped->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      return absl::InvalidArgumentError(
          absl::StrCat(file.string(), ": cannot mmap: ", std::strerror(err)));
    }
    mapped->data_ = static_cast<uint8_t*>(data);
  }
  return mapped;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace anisoscope::analysis
