// Bearer tokens: made from 256 random bits, stored only as their SHA-256, compared in
// constant time. Pure functions (NewBearerToken reads the OS's random source); thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace anisoscope::server {

// "anis_" followed by 256 random bits in base64url (43 characters).
std::string NewBearerToken();
// SHA-256 of `token` as 64 lowercase hex digits.
std::string TokenSha256(std::string_view token);
// True when the two digests are equal; the time taken does not depend on where they differ.
bool DigestsEqual(std::string_view a, std::string_view b);
// The token of an `Authorization` value "Bearer TOKEN" (the scheme in any case).
// UNAUTHENTICATED, never echoing the value, when it has another form.
absl::StatusOr<std::string> TokenFromAuthorization(std::string_view authorization);

}  // namespace anisoscope::server
