#include "sources/listing/listing_paths.h"

#include <fnmatch.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sources/cache/cache_names.h"

namespace anisoscope::listing {

absl::Status CheckListedPath(absl::string_view path, absl::string_view where) {
  return cache::FileSegments(path, where).status();
}

std::string PercentEncode(absl::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    }
  }
  return out;
}

std::string HubFileUrlPrefix(absl::string_view endpoint, absl::string_view repo,
                             absl::string_view commit) {
  return absl::StrCat(endpoint, "/", repo, "/resolve/", commit, "/");
}

std::string S3FileUrlPrefix(absl::string_view endpoint, absl::string_view bucket,
                            absl::string_view folder) {
  return absl::StrCat(endpoint, "/", PercentEncode(bucket, /*keep_slash=*/false), "/",
                      PercentEncode(folder, /*keep_slash=*/true));
}

bool MatchesGlob(absl::string_view glob, absl::string_view name) {
  const std::string pattern(glob);
  const std::string text(name);
  if (pattern.find('\0') != std::string::npos || text.find('\0') != std::string::npos) {
    return false;
  }
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

std::optional<std::string> NextLink(const std::vector<std::string>& link_fields) {
  for (const std::string& field : link_fields) {
    // A field may hold several links: "<a>; rel=x, <b>; rel=next".
    for (absl::string_view link : absl::StrSplit(field, ", <")) {
      link = absl::StripAsciiWhitespace(link);
      absl::ConsumePrefix(&link, "<");
      const size_t close = link.find('>');
      if (close == absl::string_view::npos) continue;
      const absl::string_view target = link.substr(0, close);
      for (absl::string_view param : absl::StrSplit(link.substr(close + 1), ';')) {
        param = absl::StripAsciiWhitespace(param);
        if (!absl::ConsumePrefix(&param, "rel=")) continue;
        param = absl::StripPrefix(absl::StripSuffix(param, "\""), "\"");
        for (absl::string_view rel : absl::StrSplit(param, ' ')) {
          if (absl::EqualsIgnoreCase(rel, "next")) return std::string(target);
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace anisoscope::listing
