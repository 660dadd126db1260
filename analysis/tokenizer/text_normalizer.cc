#include "analysis/tokenizer/text_normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "absl/strings/str_replace.h"

namespace anisoscope::analysis::internal {
namespace {

using Kind = NormalizerStep::Kind;

const icu::Normalizer2* UnicodeNormalizerOf(Kind kind) {
  UErrorCode status = U_ZERO_ERROR;
  switch (kind) {
    case Kind::kNfc:
      return icu::Normalizer2::getNFCInstance(status);
    case Kind::kNfd:
      return icu::Normalizer2::getNFDInstance(status);
    case Kind::kNfkc:
      return icu::Normalizer2::getNFKCInstance(status);
    case Kind::kNfkd:
      return icu::Normalizer2::getNFKDInstance(status);
    case Kind::kPrepend:
    case Kind::kReplace:
      break;
  }
  return nullptr;
}

void UnicodeNormalize(const icu::Normalizer2& normalizer, std::string* text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece input(text->data(), static_cast<int32_t>(text->size()));
  if (normalizer.isNormalizedUTF8(input, status) && U_SUCCESS(status)) return;
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  status = U_ZERO_ERROR;
  normalizer.normalizeUTF8(0, input, sink, nullptr, status);
  // The input is valid UTF-8, so ICU does not fail; keep the text if it ever does.
  if (U_SUCCESS(status)) *text = std::move(out);
}

}  // namespace

std::string TextNormalizer::Normalize(std::string_view text) const {
  std::string out(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case Kind::kReplace:
        out = absl::StrReplaceAll(out, {{step.text, step.replacement}});
        break;
      case Kind::kNfc:
      case Kind::kNfd:
      case Kind::kNfkc:
      case Kind::kNfkd:
        UnicodeNormalize(*UnicodeNormalizerOf(step.kind), &out);
        break;
    }
  }
  return out;
}

}  // namespace anisoscope::analysis::internal
