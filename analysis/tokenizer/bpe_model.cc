#include "analysis/tokenizer/bpe_model.h"

#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "analysis/tokenizer/byte_level.h"

namespace anisoscope::analysis::internal {
namespace {

constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();

uint64_t PairKey(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    absl::flat_hash_map<std::string, int64_t> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, const Options& options) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->options_ = options;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id > kMaxId) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocabulary token \"", token, "\" has id ", id, ", outside [0, 2^31)"));
    }
    model->vocab_size_ = std::max(model->vocab_size_, id + 1);
  }
  model->vocab_ = std::move(vocab);
  model->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::optional<int64_t> left_id = model->TokenId(left);
    const std::optional<int64_t> right_id = model->TokenId(right);
    const std::optional<int64_t> new_id = model->TokenId(left + right);
    if (!left_id || !right_id || !new_id) {
      return absl::InvalidArgumentError(absl::StrCat("merge ", rank, " (\"", left, " ", right,
                                                     "\"): \"",
                                                     !left_id    ? left
                                                     : !right_id ? right
                                                                 : left + right,
                                                     "\" is not in the vocabulary"));
    }
    // As tokenizers' HashMap collect: a repeated pair keeps its last rank.
    model->merges_[PairKey(*left_id, *right_id)] = {static_cast<int32_t>(rank), *new_id};
  }
  const std::array<std::string, 256>& byte_to_unicode = ByteToUnicode();
  for (int b = 0; b < 256; ++b) {
    model->byte_ids_[b] = model->TokenId(byte_to_unicode[b]).value_or(-1);
  }
  return model;
}

std::optional<int64_t> BpeModel::TokenId(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::Merge* BpeModel::FindMerge(int64_t left, int64_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

template <typename Encode>
void BpeModel::Cached(std::string_view word, bool byte_level, const Encode& encode,
                      std::vector<int64_t>* ids) const {
  // As tokenizers' cache: long words (a whole text without pre-tokenizer) are not kept.
  constexpr size_t kMaxCachedBytes = 256;
  if (options_.cache_capacity == 0 || word.size() > kMaxCachedBytes) {
    encode();
    return;
  }
  std::string key(word);
  key.push_back(byte_level ? 'b' : 'c');
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = ids->size();
  encode();
  std::lock_guard<std::mutex> lock(cache_mutex_);
  // A full cache keeps what it has (HF's cache also stops filling).
  if (cache_.size() < options_.cache_capacity) {
    cache_.emplace(std::move(key), std::vector<int64_t>(ids->begin() + before, ids->end()));
  }
}

void BpeModel::EncodeByteLevelWord(std::string_view word_bytes, std::vector<int64_t>* ids) const {
  Cached(word_bytes, /*byte_level=*/true, [&] {
    if (options_.ignore_merges) {
      if (std::optional<int64_t> id = TokenId(BytesToUnicode(word_bytes))) {
        ids->push_back(*id);
        return;
      }
    }
    MergeSymbols(ByteLevelSymbols(word_bytes), ids);
  }, ids);
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int64_t>* ids) const {
  Cached(word, /*byte_level=*/false, [&] {
    if (options_.ignore_merges) {
      if (std::optional<int64_t> id = TokenId(word)) {
        ids->push_back(*id);
        return;
      }
    }
    MergeSymbols(CharacterSymbols(word), ids);
  }, ids);
}

std::vector<int64_t> BpeModel::ByteLevelSymbols(std::string_view word_bytes) const {
  std::vector<int64_t> symbols;
  symbols.reserve(word_bytes.size());
  for (const char byte : word_bytes) {
    const int64_t id = byte_ids_[static_cast<uint8_t>(byte)];
    if (id >= 0) {
      symbols.push_back(id);
    } else if (options_.unk_id) {
      symbols.push_back(*options_.unk_id);
    }
  }
  return symbols;
}

// As tokenizers' BPE::merge_word: each character's id, else its bytes' <0xAB> ids, else unk
// (runs of unk fused into one when fuse_unk).
std::vector<int64_t> BpeModel::CharacterSymbols(std::string_view word) const {
  std::vector<int64_t> symbols;
  symbols.reserve(word.size());
  bool last_was_unk = false;
  for (const std::string_view character : Utf8Characters(word)) {
    if (std::optional<int64_t> id = TokenId(character)) {
      symbols.push_back(*id);
      last_was_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      std::vector<int64_t> bytes;
      for (const char byte : character) {
        char name[7];
        std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<uint8_t>(byte));
        if (std::optional<int64_t> id = TokenId(name)) bytes.push_back(*id);
      }
      if (bytes.size() == character.size()) {
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        last_was_unk = false;
        continue;
      }
    }
    if (!options_.unk_id) continue;
    if (!(last_was_unk && options_.fuse_unk)) symbols.push_back(*options_.unk_id);
    last_was_unk = true;
  }
  return symbols;
}

void BpeModel::MergeSymbols(const std::vector<int64_t>& initial, std::vector<int64_t>* ids) const {
  // A doubly linked list of symbols; merged-away symbols get id -1.
  struct Symbol {
    int64_t id;
    int prev;
    int next;
  };
  if (initial.empty()) return;
  std::vector<Symbol> symbols;
  symbols.reserve(initial.size());
  for (const int64_t id : initial) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  }
  symbols.back().next = -1;

  // (rank, position, new id): lowest rank first, then leftmost, as tokenizers' Merge order.
  using Candidate = std::tuple<int32_t, int, int64_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* merge = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      queue.emplace(merge->rank, static_cast<int>(i), merge->new_id);
    }
  }
  while (!queue.empty()) {
    const auto [rank, pos, new_id] = queue.top();
    queue.pop();
    Symbol& current = symbols[pos];
    if (current.id < 0 || current.next < 0) continue;
    const int right = current.next;
    // Skip entries made stale by an earlier merge on either side.
    const Merge* merge = FindMerge(current.id, symbols[right].id);
    if (merge == nullptr || merge->new_id != new_id) continue;
    current.id = new_id;
    current.next = symbols[right].next;
    symbols[right].id = -1;
    if (current.next >= 0) symbols[current.next].prev = pos;
    if (current.prev >= 0) {
      if (const Merge* left = FindMerge(symbols[current.prev].id, current.id)) {
        queue.emplace(left->rank, current.prev, left->new_id);
      }
    }
    if (current.next >= 0) {
      if (const Merge* next = FindMerge(current.id, symbols[current.next].id)) {
        queue.emplace(next->rank, pos, next->new_id);
      }
    }
  }
  for (int i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace anisoscope::analysis::internal
