#include "sources/transfer/url_parts.h"

#include <curl/curl.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::transfer {
namespace {

struct UrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};
using UrlHandle = std::unique_ptr<CURLU, UrlDeleter>;

// A part of a parsed URL; empty when it has none.
std::string Part(CURLU* url, CURLUPart part, unsigned int flags = 0) {
  char* value = nullptr;
  if (curl_url_get(url, part, &value, flags) != CURLUE_OK || value == nullptr) return "";
  std::string copy(value);
  curl_free(value);
  return copy;
}

// `url` parsed as an absolute URL; null when it is not one.
UrlHandle Parse(absl::string_view url) {
  UrlHandle handle(curl_url());
  if (handle == nullptr) return nullptr;
  const std::string text(url);
  if (curl_url_set(handle.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) return nullptr;
  return handle;
}

}  // namespace

absl::StatusOr<UrlOrigin> OriginOf(absl::string_view url) {
  const UrlHandle handle = Parse(url);
  if (handle == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("URL ", UrlForMessages(url), " is not an absolute http(s) URL"));
  }
  UrlOrigin origin;
  origin.scheme = absl::AsciiStrToLower(Part(handle.get(), CURLUPART_SCHEME));
  origin.host = absl::AsciiStrToLower(Part(handle.get(), CURLUPART_HOST));
  const std::string port = Part(handle.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if ((origin.scheme != "http" && origin.scheme != "https") || origin.host.empty() ||
      !absl::SimpleAtoi(port, &origin.port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("URL ", UrlForMessages(url), " is not an absolute http(s) URL"));
  }
  return origin;
}

std::string UrlForMessages(absl::string_view url) {
  const UrlHandle handle = Parse(url);
  if (handle == nullptr) return "(unparsable URL)";
  curl_url_set(handle.get(), CURLUPART_USER, nullptr, 0);
  curl_url_set(handle.get(), CURLUPART_PASSWORD, nullptr, 0);
  curl_url_set(handle.get(), CURLUPART_OPTIONS, nullptr, 0);
  curl_url_set(handle.get(), CURLUPART_QUERY, nullptr, 0);
  curl_url_set(handle.get(), CURLUPART_FRAGMENT, nullptr, 0);
  const std::string shown = Part(handle.get(), CURLUPART_URL);
  return shown.empty() ? "(unparsable URL)" : shown;
}

}  // namespace anisoscope::transfer
