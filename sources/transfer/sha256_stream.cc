#include "sources/transfer/sha256_stream.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace anisoscope::transfer {

Sha256Stream::Sha256Stream() : context_(EVP_MD_CTX_new()) { Reset(); }

void Sha256Stream::Reset() { EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr); }

void Sha256Stream::Update(absl::string_view bytes) {
  EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size());
}

absl::Status Sha256Stream::UpdateFromFile(int fd, int64_t length, absl::string_view path) {
  std::vector<char> buffer(1 << 20);
  int64_t offset = 0;
  while (offset < length) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(buffer.size(), length - offset));
    const ssize_t got = ::pread(fd, buffer.data(), want, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return absl::DataLossError(absl::StrCat("cannot read back ", path, " at byte ", offset, ": ",
                                              got < 0 ? std::strerror(errno) : "end of file"));
    }
    Update(absl::string_view(buffer.data(), static_cast<size_t>(got)));
    offset += got;
  }
  return absl::OkStatus();
}

std::string Sha256Stream::HexDigest() const {
  // Finalising consumes a context, so finalise a copy.
  std::unique_ptr<EVP_MD_CTX, ContextDeleter> copy(EVP_MD_CTX_new());
  EVP_MD_CTX_copy_ex(copy.get(), context_.get());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(copy.get(), digest, &size);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xF]);
  }
  return hex;
}

}  // namespace anisoscope::transfer
