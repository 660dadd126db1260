#include "analysis/tokenizer/bpe_files.h"

#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/json_error.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis::internal {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

}  // namespace

absl::StatusOr<std::string> ReadTokenizerFile(const fs::path& file, const std::string& what,
                                              const FileGate& gate) {
  constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{256} << 20;
  absl::StatusOr<std::string> contents = gate.ReadFile(file, kMaxTokenizerFileBytes);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(what, ": ", contents.status().message()));
  }
  return contents;
}

namespace {

absl::StatusOr<json> ReadJson(const fs::path& file, const std::string& what, const FileGate& gate) {
  ASSIGN_OR_RETURN(const std::string text, ReadTokenizerFile(file, what, gate));
  try {
    return json::parse(text);
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", JsonErrorText(error)));
  }
}

absl::Status FieldError(const fs::path& file, const std::string& field,
                        const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(file.string(), ": field '", field, "' ", problem));
}

// `object[key]` when `object` is an object holding a `T` there, else `fallback` (absent or
// of another type: the checks after it then name the field).
template <typename T>
T ValueOr(const json& object, const char* key, T fallback) {
  if (!object.is_object() || !object.contains(key)) return fallback;
  const json& value = object[key];
  if constexpr (std::is_same_v<T, bool>) {
    return value.is_boolean() ? value.get<bool>() : fallback;
  } else {
    return value.is_string() ? value.get<std::string>() : fallback;
  }
}

// {"token": id, ...}; `field` names it in errors.
absl::StatusOr<absl::flat_hash_map<std::string, int64_t>> ParseVocab(const json& vocab,
                                                                     const fs::path& file,
                                                                     const std::string& field) {
  if (!vocab.is_object()) return FieldError(file, field, "is not an object of token ids");
  absl::flat_hash_map<std::string, int64_t> out;
  out.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return FieldError(file, field,
                        absl::StrCat("has token \"", token,
                                     "\" with an id that is not a "
                                     "non-negative integer"));
    }
    out.emplace(token, id.get<int64_t>());
  }
  if (out.empty()) return FieldError(file, field, "is empty");
  return out;
}

// "left right" strings (tokenizers < 0.20) or ["left", "right"] pairs.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseJsonMerges(
    const json& merges, const fs::path& file) {
  if (!merges.is_array()) return FieldError(file, "model.merges", "is not an array");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos) {
        out.emplace_back(text.substr(0, space), text.substr(space + 1));
        continue;
      }
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      out.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    return FieldError(file, absl::StrCat("model.merges[", i, "]"),
                      "is neither \"left right\" nor [\"left\", \"right\"]");
  }
  return out;
}

// A boolean `key` of `object` into *out, if present; `field` names the object in errors.
absl::Status ReadFlag(const json& object, const char* key, const fs::path& file,
                      const std::string& field, bool* out) {
  if (!object.contains(key)) return absl::OkStatus();
  if (!object[key].is_boolean()) {
    return FieldError(file, absl::StrCat(field, ".", key), "is not a boolean");
  }
  *out = object[key].get<bool>();
  return absl::OkStatus();
}

// A string `key` of `object`, or INVALID_ARGUMENT naming `field`.key.
absl::StatusOr<std::string> ReadString(const json& object, const char* key,
                                       const fs::path& file, const std::string& field) {
  if (!object.contains(key) || !object[key].is_string()) {
    return FieldError(file, absl::StrCat(field, ".", key), "is missing or not a string");
  }
  return object[key].get<std::string>();
}

// `object` with one "type" and, for "Sequence", its list under `list_key`, flattened.
absl::StatusOr<std::vector<std::pair<std::string, const json*>>> FlattenSequence(
    const json& object, const char* list_key, const fs::path& file, const std::string& field) {
  std::vector<std::pair<std::string, const json*>> steps;
  if (object.is_null()) return steps;
  const std::string type = ValueOr<std::string>(object, "type", "");
  if (type != "Sequence") {
    steps.emplace_back(field, &object);
    return steps;
  }
  if (!object.contains(list_key) || !object[list_key].is_array()) {
    return FieldError(file, absl::StrCat(field, ".", list_key), "is missing or not an array");
  }
  for (size_t i = 0; i < object[list_key].size(); ++i) {
    ASSIGN_OR_RETURN(auto inner, FlattenSequence(object[list_key][i], list_key, file,
                                                 absl::StrCat(field, ".", list_key, "[", i, "]")));
    steps.insert(steps.end(), inner.begin(), inner.end());
  }
  return steps;
}

absl::StatusOr<std::vector<NormalizerStep>> ParseNormalizer(const json& normalizer,
                                                            const fs::path& file) {
  ASSIGN_OR_RETURN(const auto flat, FlattenSequence(normalizer, "normalizers", file, "normalizer"));
  std::vector<NormalizerStep> steps;
  for (const auto& [field, step] : flat) {
    const std::string type = ValueOr<std::string>(*step, "type", "");
    NormalizerStep out;
    if (type == "NFC") {
      out.kind = NormalizerStep::Kind::kNfc;
    } else if (type == "NFD") {
      out.kind = NormalizerStep::Kind::kNfd;
    } else if (type == "NFKC") {
      out.kind = NormalizerStep::Kind::kNfkc;
    } else if (type == "NFKD") {
      out.kind = NormalizerStep::Kind::kNfkd;
    } else if (type == "Prepend") {
      out.kind = NormalizerStep::Kind::kPrepend;
      ASSIGN_OR_RETURN(out.text, ReadString(*step, "prepend", file, field));
    } else if (type == "Replace") {
      out.kind = NormalizerStep::Kind::kReplace;
      const json& pattern = step->contains("pattern") ? (*step)["pattern"] : json();
      if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string() ||
          pattern["String"].get<std::string>().empty()) {
        return FieldError(file, absl::StrCat(field, ".pattern"),
                          "is not a non-empty {\"String\": ...} (regex patterns are not supported)");
      }
      out.text = pattern["String"].get<std::string>();
      ASSIGN_OR_RETURN(out.replacement, ReadString(*step, "content", file, field));
    } else {
      return FieldError(file, absl::StrCat(field, ".type"),
                        absl::StrCat("is '", type,
                                     "'; supported: NFC, NFD, NFKC, NFKD, Prepend, Replace and "
                                     "a Sequence of them"));
    }
    steps.push_back(std::move(out));
  }
  return steps;
}

absl::StatusOr<std::vector<PreTokenizerStep>> ParsePreTokenizer(const json& pre_tokenizer,
                                                                const fs::path& file) {
  ASSIGN_OR_RETURN(const auto flat,
                   FlattenSequence(pre_tokenizer, "pretokenizers", file, "pre_tokenizer"));
  std::vector<PreTokenizerStep> steps;
  for (const auto& [field, step] : flat) {
    const std::string type = ValueOr<std::string>(*step, "type", "");
    if (!steps.empty() && steps.back().kind == PreTokenizerStep::Kind::kByteLevel) {
      return FieldError(file, field, "follows a ByteLevel step, which must come last");
    }
    PreTokenizerStep out;
    out.field = field;
    if (type == "ByteLevel") {
      out.kind = PreTokenizerStep::Kind::kByteLevel;
      RETURN_IF_ERROR(ReadFlag(*step, "add_prefix_space", file, field, &out.add_prefix_space));
      RETURN_IF_ERROR(ReadFlag(*step, "use_regex", file, field, &out.use_regex));
    } else if (type == "Split") {
      out.kind = PreTokenizerStep::Kind::kSplit;
      const json& pattern = step->contains("pattern") ? (*step)["pattern"] : json();
      if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
        out.pattern = pattern["Regex"].get<std::string>();
      } else {
        return FieldError(file, absl::StrCat(field, ".pattern"), "is not a {\"Regex\": ...}");
      }
      if (ValueOr<std::string>(*step, "behavior", "") != "Isolated" ||
          ValueOr(*step, "invert", false)) {
        return FieldError(file, absl::StrCat(field, ".behavior"),
                          "is not \"Isolated\" without invert, the only split supported");
      }
    } else if (type == "Metaspace") {
      out.kind = PreTokenizerStep::Kind::kMetaspace;
      ASSIGN_OR_RETURN(out.replacement, ReadString(*step, "replacement", file, field));
      RETURN_IF_ERROR(ReadFlag(*step, "split", file, field, &out.split));
      // prepend_scheme (tokenizers >= 0.14), else the older add_prefix_space.
      bool add_prefix_space = true;
      RETURN_IF_ERROR(ReadFlag(*step, "add_prefix_space", file, field, &add_prefix_space));
      const std::string scheme =
          ValueOr<std::string>(*step, "prepend_scheme", add_prefix_space ? "always" : "never");
      if (scheme == "always") {
        out.prepend = PreTokenizerStep::Prepend::kAlways;
      } else if (scheme == "first") {
        out.prepend = PreTokenizerStep::Prepend::kFirst;
      } else if (scheme == "never") {
        out.prepend = PreTokenizerStep::Prepend::kNever;
      } else {
        return FieldError(file, absl::StrCat(field, ".prepend_scheme"),
                          absl::StrCat("is '", scheme, "'; supported: always, first, never"));
      }
    } else {
      return FieldError(file, absl::StrCat(field, ".type"),
                        absl::StrCat("is '", type,
                                     "'; supported: null, ByteLevel, Split, Metaspace and a "
                                     "Sequence of them"));
    }
    steps.push_back(std::move(out));
  }
  return steps;
}

// The special tokens a TemplateProcessing post_processor puts around a single text ($A);
// ByteLevel post-processing changes no ids.
absl::Status ParsePostProcessor(const json& post_processor, const fs::path& file,
                                BpeConfig* config) {
  ASSIGN_OR_RETURN(const auto flat,
                   FlattenSequence(post_processor, "processors", file, "post_processor"));
  for (const auto& [field, step] : flat) {
    const std::string type = ValueOr<std::string>(*step, "type", "");
    if (type == "ByteLevel") continue;
    if (type != "TemplateProcessing") {
      return FieldError(file, absl::StrCat(field, ".type"),
                        absl::StrCat("is '", type,
                                     "'; supported: null, ByteLevel, TemplateProcessing and a "
                                     "Sequence of them"));
    }
    const json& single = step->contains("single") ? (*step)["single"] : json();
    const json& specials = step->contains("special_tokens") ? (*step)["special_tokens"] : json();
    if (!single.is_array() || !specials.is_object()) {
      return FieldError(file, field, "needs a 'single' array and a 'special_tokens' object");
    }
    bool after_text = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const json& piece = single[i];
      const std::string piece_field = absl::StrCat(field, ".single[", i, "]");
      if (piece.contains("Sequence")) {
        after_text = true;
        continue;
      }
      const json& special = piece.contains("SpecialToken") ? piece["SpecialToken"] : json();
      const std::string name = ValueOr<std::string>(special, "id", "");
      const json& entry = specials.contains(name) ? specials[name] : json();
      if (!entry.is_object() || !entry.contains("ids") || !entry["ids"].is_array()) {
        return FieldError(file, piece_field,
                          absl::StrCat("names special token '", name,
                                       "', which special_tokens does not give ids for"));
      }
      for (const json& id : entry["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0) {
          return FieldError(file, absl::StrCat(field, ".special_tokens.", name, ".ids"),
                            "holds an id that is not a non-negative integer");
        }
        (after_text ? config->suffix_ids : config->prefix_ids).push_back(id.get<int64_t>());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const json& added, const fs::path& file, BpeConfig* config) {
  if (added.is_null()) return absl::OkStatus();
  if (!added.is_array()) return FieldError(file, "added_tokens", "is not an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& token = added[i];
    const std::string field = absl::StrCat("added_tokens[", i, "]");
    if (!token.is_object() || !token.contains("content") || !token["content"].is_string() ||
        !token.contains("id") || !token["id"].is_number_integer() ||
        token["id"].get<int64_t>() < 0) {
      return FieldError(file, field, "needs a string 'content' and a non-negative integer 'id'");
    }
    for (const char* unsupported : {"single_word", "lstrip", "rstrip"}) {
      if (ValueOr(token, unsupported, false)) {
        return FieldError(file, absl::StrCat(field, ".", unsupported),
                          "is true, which is not supported");
      }
    }
    // HF's default: special tokens match the raw text, others the normalized text.
    const bool normalized = ValueOr(token, "normalized", !ValueOr(token, "special", false));
    AddedTokens::Token entry{token["content"].get<std::string>(), token["id"].get<int64_t>()};
    (normalized ? config->normalized_added : config->raw_added).push_back(std::move(entry));
  }
  return absl::OkStatus();
}

absl::StatusOr<BpeConfig> ParseTokenizerJson(const json& root, const fs::path& file) {
  if (!root.is_object()) return FieldError(file, "(root)", "is not an object");
  BpeConfig config;
  config.source = file.string();
  const json& model = root.contains("model") ? root["model"] : json();
  if (!model.is_object()) return FieldError(file, "model", "is missing");
  const std::string type = ValueOr<std::string>(model, "type", "");
  if (type != "BPE") {
    return FieldError(file, "model.type",
                      absl::StrCat("is '", type, "'; only BPE is supported here"));
  }
  for (const char* field : {"vocab", "merges"}) {
    if (!model.contains(field))
      return FieldError(file, absl::StrCat("model.", field), "is missing");
  }
  // Null or "" (what GPT-2's converted tokenizer.json has) are both "unset".
  for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"}) {
    if (model.contains(field) && !model[field].is_null() &&
        !(model[field].is_string() && model[field].get<std::string>().empty())) {
      return FieldError(file, absl::StrCat("model.", field), "is set, which is not supported");
    }
  }
  ASSIGN_OR_RETURN(config.vocab, ParseVocab(model["vocab"], file, "model.vocab"));
  ASSIGN_OR_RETURN(config.merges, ParseJsonMerges(model["merges"], file));
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    config.unk_token = model["unk_token"].get<std::string>();
  }
  for (const auto& [key, flag] : {std::pair<const char*, bool*>{"ignore_merges", &config.ignore_merges},
                                  {"byte_fallback", &config.byte_fallback},
                                  {"fuse_unk", &config.fuse_unk}}) {
    RETURN_IF_ERROR(ReadFlag(model, key, file, "model", flag));
  }
  const auto member = [&root](const char* key) { return root.contains(key) ? root[key] : json(); };
  ASSIGN_OR_RETURN(config.normalizer, ParseNormalizer(member("normalizer"), file));
  ASSIGN_OR_RETURN(config.pre_tokenizer, ParsePreTokenizer(member("pre_tokenizer"), file));
  RETURN_IF_ERROR(ParsePostProcessor(member("post_processor"), file, &config));
  RETURN_IF_ERROR(ParseAddedTokens(member("added_tokens"), file, &config));
  return config;
}

}  // namespace

absl::StatusOr<BpeConfig> ReadTokenizerJson(const fs::path& file, const FileGate& gate) {
  ASSIGN_OR_RETURN(const json root, ReadJson(file, "tokenizer.json", gate));
  // The parsers check each field's type; a nlohmann exception is a check they missed.
  try {
    return ParseTokenizerJson(root, file);
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.string(), ": a field has an unexpected type (", error.what(), ")"));
  }
}

absl::StatusOr<BpeConfig> ReadVocabAndMerges(const fs::path& vocab_json, const fs::path& merges_txt,
                                             const FileGate& gate) {
  BpeConfig config;
  config.source = absl::StrCat(vocab_json.string(), " + ", merges_txt.string());
  config.pre_tokenizer.push_back({PreTokenizerStep::Kind::kByteLevel});
  ASSIGN_OR_RETURN(const json vocab, ReadJson(vocab_json, "vocab.json", gate));
  ASSIGN_OR_RETURN(config.vocab, ParseVocab(vocab, vocab_json, "(root)"));
  ASSIGN_OR_RETURN(const std::string merges, ReadTokenizerFile(merges_txt, "merges.txt", gate));
  // As tokenizers' BPE::read_file: "#version" lines skipped, every other line "left right".
  size_t line_number = 0;
  for (size_t pos = 0; pos < merges.size();) {
    size_t end = merges.find('\n', pos);
    if (end == std::string::npos) end = merges.size();
    std::string_view line(merges.data() + pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 8) == "#version") continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(merges_txt.string(), ": line ", line_number, " is not \"left right\""));
    }
    config.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  if (config.merges.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(merges_txt.string(), ": has no merges"));
  }
  // GPT2TokenizerFast registers <|endoftext|> (bos, eos and unk) as a special added token.
  constexpr char kEndOfText[] = "<|endoftext|>";
  if (auto it = config.vocab.find(kEndOfText); it != config.vocab.end()) {
    config.raw_added.push_back({kEndOfText, it->second});
  }
  return config;
}

}  // namespace anisoscope::analysis::internal
