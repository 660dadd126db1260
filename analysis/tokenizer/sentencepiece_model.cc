#include "analysis/tokenizer/sentencepiece_model.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/tokenizer/byte_level.h"
#include "common/status_macros.h"

namespace anisoscope::analysis::internal {
namespace {

namespace fs = std::filesystem;

// sentencepiece_model.proto: the fields read here.
constexpr int kModelPieces = 1;         // repeated SentencePiece
constexpr int kModelTrainerSpec = 2;    // TrainerSpec
constexpr int kModelNormalizerSpec = 3;  // NormalizerSpec
constexpr int kPiecePiece = 1;          // string
constexpr int kPieceScore = 2;          // float
constexpr int kPieceType = 3;           // enum Type
constexpr int kTrainerModelType = 3;    // enum ModelType: 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR
constexpr int kTrainerByteFallback = 35;
constexpr int kTrainerUnkId = 40;
constexpr int kTrainerBosId = 41;
constexpr int kTrainerEosId = 42;
constexpr int kNormalizerName = 1;
constexpr int kNormalizerAddDummyPrefix = 3;
constexpr int kNormalizerRemoveExtraWhitespaces = 4;

enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct Piece {
  std::string piece;
  float score = 0;
  int type = kNormal;
};

struct Model {
  std::vector<Piece> pieces;
  int model_type = 1;  // proto default: UNIGRAM
  bool byte_fallback = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2;  // proto defaults
  std::string normalizer = "nmt_nfkc";         // proto default
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
};

// One field of a protobuf message: a varint, a 32-bit value or a length-delimited payload.
struct Field {
  int number = 0;
  int wire_type = 0;
  uint64_t varint = 0;
  uint32_t fixed32 = 0;
  std::string_view bytes;
};

// Protobuf wire format over a byte range; false at a malformed field.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  bool Done() const { return pos_ >= data_.size(); }

  bool Next(Field* field) {
    uint64_t key = 0;
    if (!Varint(&key) || (key >> 3) == 0 || (key >> 3) > (1u << 29)) return false;
    field->number = static_cast<int>(key >> 3);
    field->wire_type = static_cast<int>(key & 7);
    switch (field->wire_type) {
      case 0:
        return Varint(&field->varint);
      case 1:
        return Skip(8);
      case 2: {
        uint64_t length = 0;
        if (!Varint(&length) || length > data_.size() - pos_) return false;
        field->bytes = data_.substr(pos_, length);
        pos_ += length;
        return true;
      }
      case 5:
        if (data_.size() - pos_ < 4) return false;
        std::memcpy(&field->fixed32, data_.data() + pos_, 4);
        pos_ += 4;
        return true;
      default:
        return false;
    }
  }

 private:
  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (byte < 0x80) return true;
    }
    return false;
  }
  bool Skip(size_t n) {
    if (data_.size() - pos_ < n) return false;
    pos_ += n;
    return true;
  }

  std::string_view data_;
  size_t pos_ = 0;
};

// Calls `visit` on every field of `message`; INVALID_ARGUMENT naming `what` when malformed.
absl::Status ForEachField(std::string_view message, const std::string& what,
                          const std::function<void(const Field&)>& visit) {
  WireReader reader(message);
  while (!reader.Done()) {
    Field field;
    if (!reader.Next(&field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("is not a SentencePiece model (malformed protobuf in ", what, ")"));
    }
    visit(field);
  }
  return absl::OkStatus();
}

absl::StatusOr<Model> ParseModel(std::string_view bytes) {
  Model model;
  std::string_view trainer, normalizer;
  std::vector<std::string_view> pieces;
  RETURN_IF_ERROR(ForEachField(bytes, "ModelProto", [&](const Field& field) {
    if (field.wire_type != 2) return;
    if (field.number == kModelPieces) pieces.push_back(field.bytes);
    if (field.number == kModelTrainerSpec) trainer = field.bytes;
    if (field.number == kModelNormalizerSpec) normalizer = field.bytes;
  }));
  for (size_t i = 0; i < pieces.size(); ++i) {
    Piece piece;
    RETURN_IF_ERROR(ForEachField(pieces[i], absl::StrCat("pieces[", i, "]"), [&](const Field& f) {
      if (f.number == kPiecePiece && f.wire_type == 2) piece.piece = std::string(f.bytes);
      if (f.number == kPieceScore && f.wire_type == 5) std::memcpy(&piece.score, &f.fixed32, 4);
      if (f.number == kPieceType && f.wire_type == 0) piece.type = static_cast<int>(f.varint);
    }));
    model.pieces.push_back(std::move(piece));
  }
  RETURN_IF_ERROR(ForEachField(trainer, "trainer_spec", [&](const Field& f) {
    if (f.wire_type != 0) return;
    const auto value = static_cast<int64_t>(static_cast<int32_t>(f.varint));
    if (f.number == kTrainerModelType) model.model_type = static_cast<int>(value);
    if (f.number == kTrainerByteFallback) model.byte_fallback = f.varint != 0;
    if (f.number == kTrainerUnkId) model.unk_id = value;
    if (f.number == kTrainerBosId) model.bos_id = value;
    if (f.number == kTrainerEosId) model.eos_id = value;
  }));
  RETURN_IF_ERROR(ForEachField(normalizer, "normalizer_spec", [&](const Field& f) {
    if (f.number == kNormalizerName && f.wire_type == 2) model.normalizer = std::string(f.bytes);
    if (f.number == kNormalizerAddDummyPrefix && f.wire_type == 0) {
      model.add_dummy_prefix = f.varint != 0;
    }
    if (f.number == kNormalizerRemoveExtraWhitespaces && f.wire_type == 0) {
      model.remove_extra_whitespaces = f.varint != 0;
    }
  }));
  return model;
}

// transformers' SentencePieceExtractor: for each piece (in id order) its splits into two
// vocabulary pieces, ordered by the pieces' ids; then all of them by the piece's score,
// highest first (a stable sort, as Python's sorted).
std::vector<std::pair<std::string, std::string>> ExtractMerges(
    const std::vector<Piece>& pieces, const absl::flat_hash_map<std::string, int64_t>& vocab) {
  struct Merge {
    std::string left, right;
    int64_t left_id, right_id;
    float score;
  };
  std::vector<Merge> merges;
  for (const Piece& piece : pieces) {
    // Code points, as Python's len() and slicing count them.
    const std::vector<std::string_view> chars = Utf8Characters(piece.piece);
    std::vector<Merge> local;
    size_t split = 0;
    for (size_t i = 1; i < chars.size(); ++i) {
      split += chars[i - 1].size();
      std::string left = piece.piece.substr(0, split);
      std::string right = piece.piece.substr(split);
      auto l = vocab.find(left);
      auto r = vocab.find(right);
      if (l == vocab.end() || r == vocab.end()) continue;
      local.push_back({std::move(left), std::move(right), l->second, r->second, piece.score});
    }
    std::stable_sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return std::tie(a.left_id, a.right_id) < std::tie(b.left_id, b.right_id);
    });
    for (Merge& merge : local) merges.push_back(std::move(merge));
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (Merge& merge : merges) out.emplace_back(std::move(merge.left), std::move(merge.right));
  return out;
}

}  // namespace

absl::StatusOr<BpeConfig> ReadSentencePieceModel(const fs::path& file, const FileGate& gate) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadTokenizerFile(file, "SentencePiece model", gate));
  const auto error = [&file](const std::string& field, const std::string& problem) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.string(), ": field '", field, "' ", problem));
  };
  absl::StatusOr<Model> parsed = ParseModel(bytes);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", parsed.status().message()));
  }
  const Model& model = *parsed;
  if (model.pieces.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.string(), ": is not a SentencePiece model (no pieces)"));
  }
  if (model.model_type != 2) {
    return error("trainer_spec.model_type",
                 absl::StrCat("is ", model.model_type,
                              " (1 Unigram, 3 word, 4 char); only BPE models (2: LLaMA, "
                              "Mistral, TinyLlama, Amber) are supported"));
  }
  if (model.normalizer != "identity") {
    return error("normalizer_spec.name",
                 absl::StrCat("is '", model.normalizer, "'; only 'identity' is supported"));
  }
  if (model.remove_extra_whitespaces) {
    return error("normalizer_spec.remove_extra_whitespaces", "is true, which is not supported");
  }
  const auto pieces = static_cast<int64_t>(model.pieces.size());
  for (const auto& [name, id] : {std::pair<const char*, int64_t>{"unk_id", model.unk_id},
                                 {"bos_id", model.bos_id},
                                 {"eos_id", model.eos_id}}) {
    if (id >= pieces || (id < 0 && std::string(name) == "unk_id")) {
      return error(absl::StrCat("trainer_spec.", name),
                   absl::StrCat("is ", id, ", not one of the ", pieces, " pieces"));
    }
  }

  BpeConfig config;
  config.source = file.string();
  for (int64_t id = 0; id < pieces; ++id) {
    const Piece& piece = model.pieces[id];
    config.vocab.emplace(piece.piece, id);
    // As LlamaTokenizer: unk, the control pieces and user-defined ones match whole in the
    // raw text.
    if (piece.type == kUnknown || piece.type == kControl || piece.type == kUserDefined) {
      config.raw_added.push_back({piece.piece, id});
    }
  }
  config.merges = ExtractMerges(model.pieces, config.vocab);
  config.unk_token = model.pieces[model.unk_id].piece;
  config.byte_fallback = model.byte_fallback;
  config.fuse_unk = true;
  constexpr char kSpace[] = "\u2581";
  if (model.add_dummy_prefix) {
    config.normalizer.push_back({NormalizerStep::Kind::kPrepend, kSpace, ""});
  }
  config.normalizer.push_back({NormalizerStep::Kind::kReplace, " ", kSpace});
  if (model.bos_id >= 0) config.prefix_ids.push_back(model.bos_id);
  return config;
}

}  // namespace anisoscope::analysis::internal
