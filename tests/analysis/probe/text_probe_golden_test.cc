// Windows probes of WikiText-2's test split equal the whole text encoded in one call:
// BPE (GPT-2, Pythia, Qwen2.5, Mistral, LLaMA's tokenizer.model) against transformers.js
// (testdata/wikitext_windows_golden.json, made by
// tests/fixtures/tokenizer_goldens/generate_windows_golden.mjs), and WordPiece
// against the line-by-line windows that probes used before (so stored BERT series keep their
// probe ids).
// Needs $ANISOSCOPE_SHARED_DATA.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "analysis/probe/probe.h"
#include "analysis/tokenizer/bpe_tokenizer.h"
#include "analysis/tokenizer/wordpiece_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using Samples = std::vector<std::vector<int64_t>>;

// Enough 512-token windows to hold every token of the test split (under 350k for each).
constexpr int64_t kAllSamples = 1000;

fs::path SharedData() {
  const char* shared = std::getenv("ANISOSCOPE_SHARED_DATA");
  return shared == nullptr ? fs::path() : fs::path(shared);
}

fs::path Wikitext() { return SharedData() / "corpora" / "wikitext-2" / "wiki.test.raw"; }

std::vector<int64_t> Concatenate(const Samples& samples) {
  std::vector<int64_t> ids;
  for (const auto& sample : samples) ids.insert(ids.end(), sample.begin(), sample.end());
  return ids;
}

// FNV-1a 64 of the ids, each as 8 little-endian bytes, in hex (as the generator computes it).
std::string Fnv1a64(const std::vector<int64_t>& ids) {
  uint64_t hash = 14695981039346656037ull;
  for (const int64_t id : ids) {
    auto bits = static_cast<uint64_t>(id);
    for (int byte = 0; byte < 8; ++byte, bits >>= 8) {
      hash ^= bits & 0xff;
      hash *= 1099511628211ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// The tokenizer a windows golden was made with: GPT-2 and Pythia from the shared data,
// Qwen2.5, Mistral and LLaMA (tokenizer.model) from tests/data/tokenizers.
absl::StatusOr<std::unique_ptr<BpeTokenizer>> GoldenTokenizer(const std::string& name) {
  const fs::path shared = SharedData() / "tokenizers" / name;
  const fs::path repo = fs::path(ANISOSCOPE_REPO_TOKENIZERS) / name;
  if (name == "gpt2") {
    return BpeTokenizer::FromVocabAndMerges(shared / "vocab.json", shared / "merges.txt",
                                            FileGate::Host());
  }
  if (name == "pythia")
    return BpeTokenizer::FromTokenizerJson(shared / "tokenizer.json", FileGate::Host());
  if (name == "llama")
    return BpeTokenizer::FromSentencePieceModel(repo / "tokenizer.model", FileGate::Host());
  return BpeTokenizer::FromTokenizerJson(repo / "tokenizer.json", FileGate::Host());
}

class WindowsGoldenTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (SharedData().empty()) GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA is not set";
    if (!fs::exists(Wikitext())) GTEST_SKIP() << Wikitext() << " is missing";
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = GoldenTokenizer(GetParam());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    std::ifstream in(fs::path(ANISOSCOPE_PROBE_TESTDATA) / "wikitext_windows_golden.json");
    golden_ = nlohmann::json::parse(in).at(GetParam());
  }

  std::unique_ptr<BpeTokenizer> tokenizer_;
  nlohmann::json golden_;
};

TEST_P(WindowsGoldenTest, AllWindowsOfTheTestSplitMatchTheWholeTextDigest) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Wikitext(), *tokenizer_, SampleFraming{}, TextMode::kWindows, kAllSamples, 512,
                     FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  const std::vector<int64_t> ids = Concatenate(probe->samples);
  const auto tokens = golden_.at("tokens").get<size_t>();
  ASSERT_LT(probe->samples.size(), static_cast<size_t>(kAllSamples));
  EXPECT_EQ(probe->samples.size(), (tokens + 511) / 512);
  EXPECT_EQ(ids.size(), tokens);
  EXPECT_EQ(Fnv1a64(ids), golden_.at("fnv1a64").get<std::string>());
}

TEST_P(WindowsGoldenTest, SmallProbeIsTheFirstIdsOfTheWholeText) {
  absl::StatusOr<Probe> probe = BuildTextProbe(Wikitext(), *tokenizer_, SampleFraming{},
                                               TextMode::kWindows, 4, 64, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->samples.size(), 4u);
  for (const auto& sample : probe->samples) EXPECT_EQ(sample.size(), 64u);
  EXPECT_EQ(Concatenate(probe->samples), golden_.at("first_ids").get<std::vector<int64_t>>());
}

INSTANTIATE_TEST_SUITE_P(Wikitext, WindowsGoldenTest,
                         ::testing::Values("gpt2", "pythia", "qwen2_5", "mistral", "llama"));

// The windows of probes before whole-text encoding: each non-blank line encoded alone
// (without "\n" or "\r\n"), the ids concatenated, cut into framed windows.
Samples LineByLineWindows(const fs::path& file, const WordPieceTokenizer& tokenizer,
                          size_t max_samples, size_t body) {
  std::ifstream in(file, std::ios::binary);
  std::vector<int64_t> ids;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::vector<int64_t> line_ids = tokenizer.Encode(line).value();
    ids.insert(ids.end(), line_ids.begin(), line_ids.end());
  }
  Samples samples;
  for (size_t begin = 0; begin < ids.size() && samples.size() < max_samples; begin += body) {
    std::vector<int64_t> sample{tokenizer.cls_id()};
    sample.insert(sample.end(), ids.begin() + begin,
                  ids.begin() + std::min(ids.size(), begin + body));
    sample.push_back(tokenizer.sep_id());
    samples.push_back(std::move(sample));
  }
  return samples;
}

TEST(WordPieceWindowsTest, WholeTextWindowsEqualLineByLineWindowsOnWikitext) {
  const fs::path vocab = SharedData() / "tokenizers" / "bert-base-uncased" / "vocab.txt";
  if (SharedData().empty() || !fs::exists(vocab) || !fs::exists(Wikitext())) {
    GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA, bert-base-uncased or wikitext-2 is missing";
  }
  auto tokenizer = WordPieceTokenizer::Create(vocab, {}, FileGate::Host());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const SampleFraming framing = BertFraming(**tokenizer);
  for (const auto& [samples, seq_len] :
       {std::pair<int64_t, int64_t>{128, 512}, {kAllSamples, 512}, {3, 7}}) {
    absl::StatusOr<Probe> probe = BuildTextProbe(
        Wikitext(), **tokenizer, framing, TextMode::kWindows, samples, seq_len, FileGate::Host());
    ASSERT_TRUE(probe.ok()) << probe.status();
    const Samples old = LineByLineWindows(Wikitext(), **tokenizer, samples, seq_len - 2);
    EXPECT_EQ(probe->samples.size(), old.size()) << samples << "x" << seq_len;
    EXPECT_TRUE(probe->samples == old) << samples << "x" << seq_len;
    EXPECT_EQ(probe->id, ComputeProbeId(old)) << samples << "x" << seq_len;
  }
}

TEST(WordPieceWindowsTest, AllWindowsOfWikitextMatchTheBertCorpusDigest) {
  const fs::path vocab = SharedData() / "tokenizers" / "bert-base-uncased" / "vocab.txt";
  if (SharedData().empty() || !fs::exists(vocab) || !fs::exists(Wikitext())) {
    GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA, bert-base-uncased or wikitext-2 is missing";
  }
  auto tokenizer = WordPieceTokenizer::Create(vocab, {}, FileGate::Host());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // transformers.js's digest of the split encoded line by line (tests/analysis/tokenizer).
  std::ifstream in(fs::path(ANISOSCOPE_PROBE_TESTDATA) / ".." / ".." / "tokenizer" / "testdata" /
                   "bert_uncased_golden.json");
  const nlohmann::json corpus = nlohmann::json::parse(in).at("corpus");
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Wikitext(), **tokenizer, SampleFraming{}, TextMode::kWindows, kAllSamples, 512,
                     FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  const std::vector<int64_t> ids = Concatenate(probe->samples);
  EXPECT_EQ(ids.size(), corpus.at("tokens").get<size_t>());
  EXPECT_EQ(Fnv1a64(ids), corpus.at("fnv1a64").get<std::string>());
}

}  // namespace
}  // namespace anisoscope::analysis
