#include "server/http/encoded_response.h"

#include <xxhash.h>
#include <zlib.h>

#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace anisoscope::server {
namespace {

// The opaque part of an entity tag, without W/ and the quotes.
absl::string_view OpaqueTag(absl::string_view tag) {
  tag = absl::StripAsciiWhitespace(tag);
  absl::ConsumePrefix(&tag, "W/");
  if (tag.size() >= 2 && tag.front() == '"' && tag.back() == '"') {
    tag = tag.substr(1, tag.size() - 2);
  }
  return tag;
}

}  // namespace

EncodedResponse EncodeResponse(std::string body, bool with_gzip) {
  EncodedResponse encoded;
  const uint64_t hash = XXH3_64bits(body.data(), body.size());
  encoded.etag = absl::StrCat("W/\"", absl::Hex(hash, absl::kZeroPad16), "\"");
  if (with_gzip && body.size() >= kMinGzipBytes) encoded.gzip = Gzip(body);
  encoded.body = std::move(body);
  return encoded;
}

bool IfNoneMatchHits(const std::string& if_none_match, const std::string& etag) {
  const absl::string_view wanted = OpaqueTag(etag);
  for (absl::string_view tag : absl::StrSplit(if_none_match, ',')) {
    tag = absl::StripAsciiWhitespace(tag);
    if (tag == "*" || (!tag.empty() && OpaqueTag(tag) == wanted)) return true;
  }
  return false;
}

bool AcceptsGzip(const std::string& accept_encoding) {
  for (absl::string_view item : absl::StrSplit(accept_encoding, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ';');
    const std::string coding = absl::AsciiStrToLower(absl::StripAsciiWhitespace(parts[0]));
    if (coding != "gzip" && coding != "x-gzip" && coding != "*") continue;
    double q = 1;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view parameter = absl::StripAsciiWhitespace(parts[i]);
      if (absl::ConsumePrefix(&parameter, "q=") || absl::ConsumePrefix(&parameter, "Q=")) {
        if (!absl::SimpleAtod(parameter, &q)) q = 0;
      }
    }
    return q > 0;
  }
  return false;
}

std::string Gzip(const std::string& text) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
  if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return "";
  }
  std::string out(deflateBound(&stream, text.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int result = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return result == Z_STREAM_END ? out : "";
}

std::string Gunzip(const std::string& gzip) {
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK) return "";
  std::string out;
  char buffer[1 << 16];
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gzip.data()));
  stream.avail_in = static_cast<uInt>(gzip.size());
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    result = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  inflateEnd(&stream);
  return out;
}

}  // namespace anisoscope::server
