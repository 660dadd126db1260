// SHA-256 over bytes that arrive in pieces (OpenSSL's EVP digest): a download is hashed as it
// is written, so checking a multi-gigabyte file costs no second read. Not thread-safe.
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace anisoscope::transfer {

class Sha256Stream {
 public:
  Sha256Stream();

  void Update(absl::string_view bytes);
  // Adds the first `length` bytes of open file `fd` (read from offset 0, 1 MiB at a time):
  // what a resumed download already has on disk. `path` names the file in errors.
  absl::Status UpdateFromFile(int fd, int64_t length, absl::string_view path);
  // The digest of everything so far, as 64 lower-case hex digits; the stream goes on.
  std::string HexDigest() const;
  // Forgets everything: the download restarted from byte 0.
  void Reset();

 private:
  struct ContextDeleter {
    void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
  };
  std::unique_ptr<EVP_MD_CTX, ContextDeleter> context_;
};

}  // namespace anisoscope::transfer
