#include "analysis/tokenizer/bpe_files.h"

#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis::internal {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

absl::StatusOr<std::string> ReadWholeFile(const fs::path& file, const std::string& what) {
  std::error_code error;
  if (!fs::exists(file, error)) {
    return absl::NotFoundError(absl::StrCat(what, " not found: ", file.string()));
  }
  if (!fs::is_regular_file(file, error)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a file: ", file.string()));
  }
  std::ifstream in(file, std::ios::binary);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, ": ", file.string()));
  }
  return contents;
}

absl::StatusOr<json> ReadJson(const fs::path& file, const std::string& what) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(file, what));
  try {
    return json::parse(text);
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.string(), ": malformed JSON: ", error.what()));
  }
}

absl::Status FieldError(const fs::path& file, const std::string& field,
                        const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(file.string(), ": field '", field, "' ", problem));
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

absl::StatusOr<Normalization> ParseNormalizer(const json& normalizer, const fs::path& file) {
  if (normalizer.is_null()) return Normalization::kNone;
  const std::string type = normalizer.is_object() ? normalizer.value("type", "") : "";
  if (type == "NFC") return Normalization::kNfc;
  if (type == "NFD") return Normalization::kNfd;
  if (type == "NFKC") return Normalization::kNfkc;
  if (type == "NFKD") return Normalization::kNfkd;
  return FieldError(file, "normalizer.type",
                    absl::StrCat("is '", type, "'; supported: null, NFC, NFD, NFKC, NFKD"));
}

absl::Status ParsePreTokenizer(const json& pre_tokenizer, const fs::path& file,
                               ByteLevelBpeConfig* config) {
  const std::string type = pre_tokenizer.is_object() ? pre_tokenizer.value("type", "") : "";
  if (type != "ByteLevel") {
    return FieldError(file, "pre_tokenizer.type",
                      absl::StrCat("is '", pre_tokenizer.is_null() ? "null" : type,
                                   "'; only ByteLevel is supported"));
  }
  for (const auto& [key, flag] :
       {std::pair<const char*, bool*>{"add_prefix_space", &config->add_prefix_space},
        {"use_regex", &config->use_regex}}) {
    if (!pre_tokenizer.contains(key)) continue;
    if (!pre_tokenizer[key].is_boolean()) {
      return FieldError(file, absl::StrCat("pre_tokenizer.", key), "is not a boolean");
    }
    *flag = pre_tokenizer[key].get<bool>();
  }
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const json& added, const fs::path& file, ByteLevelBpeConfig* config) {
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
      if (token.value(unsupported, false)) {
        return FieldError(file, absl::StrCat(field, ".", unsupported),
                          "is true, which is not supported");
      }
    }
    // HF's default: special tokens match the raw text, others the normalized text.
    const bool normalized = token.value("normalized", !token.value("special", false));
    AddedTokens::Token entry{token["content"].get<std::string>(), token["id"].get<int64_t>()};
    (normalized ? config->normalized_added : config->raw_added).push_back(std::move(entry));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ByteLevelBpeConfig> ReadTokenizerJson(const fs::path& file) {
  ASSIGN_OR_RETURN(const json root, ReadJson(file, "tokenizer.json"));
  if (!root.is_object()) return FieldError(file, "(root)", "is not an object");
  ByteLevelBpeConfig config;
  config.source = file.string();
  const json& model = root.contains("model") ? root["model"] : json();
  if (!model.is_object()) return FieldError(file, "model", "is missing");
  const std::string type = model.value("type", "");
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
  if (model.value("byte_fallback", false)) {
    return FieldError(file, "model.byte_fallback", "is true, which is not supported");
  }
  ASSIGN_OR_RETURN(config.vocab, ParseVocab(model["vocab"], file, "model.vocab"));
  ASSIGN_OR_RETURN(config.merges, ParseJsonMerges(model["merges"], file));
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    config.unk_token = model["unk_token"].get<std::string>();
  }
  config.ignore_merges = model.value("ignore_merges", false);
  ASSIGN_OR_RETURN(
      config.normalization,
      ParseNormalizer(root.contains("normalizer") ? root["normalizer"] : json(), file));
  RETURN_IF_ERROR(ParsePreTokenizer(root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json(),
                                    file, &config));
  RETURN_IF_ERROR(ParseAddedTokens(root.contains("added_tokens") ? root["added_tokens"] : json(),
                                   file, &config));
  return config;
}

absl::StatusOr<ByteLevelBpeConfig> ReadVocabAndMerges(const fs::path& vocab_json,
                                                      const fs::path& merges_txt) {
  ByteLevelBpeConfig config;
  config.source = absl::StrCat(vocab_json.string(), " + ", merges_txt.string());
  ASSIGN_OR_RETURN(const json vocab, ReadJson(vocab_json, "vocab.json"));
  ASSIGN_OR_RETURN(config.vocab, ParseVocab(vocab, vocab_json, "(root)"));
  ASSIGN_OR_RETURN(const std::string merges, ReadWholeFile(merges_txt, "merges.txt"));
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
