#include "server/auth/bearer_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::server {

constexpr size_t kTokenBytes = 32;

std::string NewBearerToken() {
  unsigned char bytes[kTokenBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    std::random_device device;  // the OS's source, should OpenSSL's be unavailable
    for (unsigned char& byte : bytes) byte = static_cast<unsigned char>(device());
  }
  return absl::StrCat("anis_", absl::WebSafeBase64Escape(absl::string_view(
                                   reinterpret_cast<const char*>(bytes), sizeof(bytes))));
}

std::string TokenSha256(std::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

bool DigestsEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::StatusOr<std::string> TokenFromAuthorization(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  const absl::string_view value(authorization.data(), authorization.size());
  if (value.size() <= kScheme.size() ||
      absl::AsciiStrToLower(value.substr(0, kScheme.size())) != kScheme) {
    return absl::UnauthenticatedError("the authorization header is not of the form 'Bearer TOKEN'");
  }
  return std::string(absl::StripAsciiWhitespace(value.substr(kScheme.size())));
}

}  // namespace anisoscope::server
