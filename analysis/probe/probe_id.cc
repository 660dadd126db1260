// ComputeProbeId (declared in analysis/probe/probe.h): SHA-256 with OpenSSL's libcrypto.
#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "analysis/probe/probe.h"

namespace anisoscope::analysis {
namespace {

// Bytes of the digest kept in an id: 128 bits.
constexpr size_t kIdBytes = 16;
// Values hashed per EVP_DigestUpdate call.
constexpr size_t kChunkValues = 4096;

// Appends `value` as 8 little-endian bytes.
void AppendInt64(int64_t value, std::string* bytes) {
  const auto bits = static_cast<uint64_t>(value);
  for (int byte = 0; byte < 8; ++byte) bytes->push_back(static_cast<char>(bits >> (8 * byte)));
}

}  // namespace

std::string ComputeProbeId(const std::vector<std::vector<int64_t>>& samples) {
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                        &EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  std::string bytes;
  const auto flush = [&] {
    EVP_DigestUpdate(context.get(), bytes.data(), bytes.size());
    bytes.clear();
  };
  AppendInt64(static_cast<int64_t>(samples.size()), &bytes);
  for (const std::vector<int64_t>& sample : samples) {
    AppendInt64(static_cast<int64_t>(sample.size()), &bytes);
    for (const int64_t id : sample) {
      AppendInt64(id, &bytes);
      if (bytes.size() >= kChunkValues * 8) flush();
    }
  }
  flush();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  return absl::StrCat("p", absl::BytesToHexString(
                               absl::string_view(reinterpret_cast<const char*>(digest), kIdBytes)));
}

}  // namespace anisoscope::analysis
