#include "sources/transfer/sigv4_canonical_url.h"

#include <curl/curl.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::transfer {
namespace {

bool IsUnreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendEscaped(unsigned char c, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out->push_back('%');
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 0xF]);
}

// `text` with every byte in canonical form; '/' is kept as is when `keep_slash` (a path).
std::string Canonical(absl::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
        HexValue(text[i + 2]) >= 0) {
      c = static_cast<unsigned char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
      // An escaped '/' stays escaped: in a path it is part of a name, not a separator.
      if (IsUnreserved(c)) {
        out.push_back(static_cast<char>(c));
      } else {
        AppendEscaped(c, &out);
      }
      continue;
    }
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      AppendEscaped(c, &out);
    }
  }
  return out;
}

std::string CanonicalQuery(absl::string_view query) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t equals = pair.find('=');
    if (equals == absl::string_view::npos) {
      pairs.emplace_back(Canonical(pair, false), "");
    } else {
      pairs.emplace_back(Canonical(pair.substr(0, equals), false),
                         Canonical(pair.substr(equals + 1), false));
    }
  }
  std::sort(pairs.begin(), pairs.end());
  return absl::StrJoin(pairs, "&", [](std::string* out, const auto& pair) {
    absl::StrAppend(out, pair.first, "=", pair.second);
  });
}

struct UrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};

std::string Part(CURLU* url, CURLUPart part) {
  char* value = nullptr;
  if (curl_url_get(url, part, &value, 0) != CURLUE_OK || value == nullptr) return "";
  std::string copy(value);
  curl_free(value);
  return copy;
}

}  // namespace

absl::StatusOr<std::string> CanonicalUrlForSigV4(absl::string_view url) {
  std::unique_ptr<CURLU, UrlDeleter> handle(curl_url());
  const std::string text(url);
  if (handle == nullptr ||
      curl_url_set(handle.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat("URL ", UrlForMessages(url), " is not an absolute http(s) URL"));
  }
  const std::string path = Canonical(Part(handle.get(), CURLUPART_PATH), true);
  const std::string query = CanonicalQuery(Part(handle.get(), CURLUPART_QUERY));
  // Put together here rather than by curl_url_get, which in 7.88 writes escapes in lower
  // case (a different canonical request, so a different signature).
  std::string canonical =
      absl::StrCat(Part(handle.get(), CURLUPART_SCHEME), "://", Part(handle.get(), CURLUPART_HOST));
  if (const std::string port = Part(handle.get(), CURLUPART_PORT); !port.empty()) {
    absl::StrAppend(&canonical, ":", port);
  }
  absl::StrAppend(&canonical, path.empty() ? "/" : path);
  if (!query.empty()) absl::StrAppend(&canonical, "?", query);
  return canonical;
}

}  // namespace anisoscope::transfer
