#include "sources/listing/s3_xml.h"

#include <pugixml.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sources/cache/cache_names.h"

namespace anisoscope::listing {
namespace {

// A name without its namespace prefix ("s3:Key" -> "Key").
absl::string_view LocalName(const pugi::xml_node& node) {
  absl::string_view name = node.name();
  const size_t colon = name.find(':');
  return colon == absl::string_view::npos ? name : name.substr(colon + 1);
}

pugi::xml_node Child(const pugi::xml_node& node, absl::string_view name) {
  for (pugi::xml_node child : node.children()) {
    if (child.type() == pugi::node_element && LocalName(child) == name) return child;
  }
  return {};
}

std::string Text(const pugi::xml_node& node, absl::string_view name) {
  return Child(node, name).child_value();
}

absl::Status Malformed(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": malformed listing: ", what));
}

}  // namespace

absl::StatusOr<S3ListPage> ParseListObjectsV2(absl::string_view body, absl::string_view where) {
  pugi::xml_document document;
  const pugi::xml_parse_result parsed =
      document.load_buffer(body.data(), body.size(), pugi::parse_default & ~pugi::parse_doctype);
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the answer is not XML (", parsed.description(), " at byte ", parsed.offset, ")"));
  }
  pugi::xml_node root = document.document_element();
  if (LocalName(root) != "ListBucketResult") return Malformed(where, "no ListBucketResult");
  S3ListPage page;
  for (pugi::xml_node child : root.children()) {
    if (child.type() != pugi::node_element) continue;
    const absl::string_view name = LocalName(child);
    if (name == "CommonPrefixes") {
      page.common_prefixes.push_back(Text(child, "Prefix"));
    } else if (name == "Contents") {
      S3Object object;
      const pugi::xml_node key = Child(child, "Key");
      if (!key) return Malformed(where, "an object without a key");
      object.key = key.child_value();
      if (!absl::SimpleAtoi(Text(child, "Size"), &object.size)) {
        return Malformed(where, "an object without a numeric size");
      }
      object.etag = cache::NormalizeEtag(Text(child, "ETag"));
      page.objects.push_back(std::move(object));
    }
  }
  page.truncated = Text(root, "IsTruncated") == "true";
  page.next_continuation_token = Text(root, "NextContinuationToken");
  if (page.truncated && page.next_continuation_token.empty()) {
    return Malformed(where, "a truncated page without a NextContinuationToken");
  }
  return page;
}

}  // namespace anisoscope::listing
