// BuildTextProbe: windows and lines from small temp files, and from wikitext-2.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/probe/probe.h"
#include "analysis/tokenizer/tokenizer.h"
#include "analysis/tokenizer/wordpiece_tokenizer.h"
#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using Samples = std::vector<std::vector<int64_t>>;

// Ids: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 the=4 cat=5 sat=6 on=7 mat=8 .=9 dog=10 ran=11.
constexpr char kVocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\nsat\non\nmat\n.\ndog\nran\n";
// 10 tokens: the cat sat | on the mat . | the dog ran (blank and whitespace lines between).
constexpr char kText[] = "the cat sat\n\non the mat .\n  \t \nThe dog ran\n";

class TextProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("text_probe_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream(dir_ / "vocab.txt", std::ios::binary) << kVocab;
    auto tokenizer = WordPieceTokenizer::Create(dir_ / "vocab.txt", {}, FileGate::Host());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& contents) {
    const fs::path path = dir_ / "corpus.txt";
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  fs::path dir_;
  std::unique_ptr<WordPieceTokenizer> tokenizer_;
};

TEST_F(TextProbeTest, WindowsCutTheWholeTokenStreamAcrossLines) {
  absl::StatusOr<Probe> probe = BuildTextProbe(Write(kText), *tokenizer_, BertFraming(*tokenizer_),
                                               TextMode::kWindows, 128, 5, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples,
            (Samples{{2, 4, 5, 6, 3}, {2, 7, 4, 8, 3}, {2, 9, 4, 10, 3}, {2, 11, 3}}));
  EXPECT_EQ(probe->description, "text corpus.txt windows 4x5");
  EXPECT_EQ(probe->id, ComputeProbeId(probe->samples));
  EXPECT_EQ(probe->num_tokens(), 18);
  EXPECT_EQ(probe->max_length(), 5);
}

TEST_F(TextProbeTest, WindowsStopAtMaxSamples) {
  absl::StatusOr<Probe> probe = BuildTextProbe(Write(kText), *tokenizer_, BertFraming(*tokenizer_),
                                               TextMode::kWindows, 2, 5, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{2, 4, 5, 6, 3}, {2, 7, 4, 8, 3}}));
  EXPECT_EQ(probe->description, "text corpus.txt windows 2x5");
}

TEST_F(TextProbeTest, WindowsThatFillExactlyLeaveNoEmptyTail) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Write("the cat sat on the mat\n"), *tokenizer_, BertFraming(*tokenizer_),
                     TextMode::kWindows, 128, 5, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{2, 4, 5, 6, 3}, {2, 7, 4, 8, 3}}));
}

TEST_F(TextProbeTest, ShortTextGivesOneShortWindow) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Write("the cat"), *tokenizer_, BertFraming(*tokenizer_), TextMode::kWindows,
                     128, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{2, 4, 5, 3}}));
}

TEST_F(TextProbeTest, CrLfTextGivesTheSameWindowsAsLf) {
  std::string crlf;
  for (const char c : std::string(kText))
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  absl::StatusOr<Probe> lf = BuildTextProbe(Write(kText), *tokenizer_, BertFraming(*tokenizer_),
                                            TextMode::kWindows, 8, 4, FileGate::Host());
  ASSERT_TRUE(lf.ok()) << lf.status();
  absl::StatusOr<Probe> dos = BuildTextProbe(Write(crlf), *tokenizer_, BertFraming(*tokenizer_),
                                             TextMode::kWindows, 8, 4, FileGate::Host());
  ASSERT_TRUE(dos.ok()) << dos.status();
  EXPECT_EQ(dos->samples, lf->samples);
  EXPECT_EQ(dos->id, lf->id);
}

TEST_F(TextProbeTest, LinesGiveOneTruncatedSamplePerNonEmptyLine) {
  absl::StatusOr<Probe> probe = BuildTextProbe(Write(kText), *tokenizer_, BertFraming(*tokenizer_),
                                               TextMode::kLines, 128, 4, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{2, 4, 5, 3}, {2, 7, 4, 3}, {2, 4, 10, 3}}));
  EXPECT_EQ(probe->description, "text corpus.txt lines 3x4");
}

TEST_F(TextProbeTest, LinesKeepShortLinesWhole) {
  absl::StatusOr<Probe> probe = BuildTextProbe(Write(kText), *tokenizer_, BertFraming(*tokenizer_),
                                               TextMode::kLines, 128, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{2, 4, 5, 6, 3}, {2, 7, 4, 8, 9, 3}, {2, 4, 10, 11, 3}}));
}

TEST_F(TextProbeTest, AHugeLineIsReadPastNotHeldWhole) {
  // 64 MiB of "the cat " on one line, then a short line: a sample is the first tokens of a
  // line, so the rest of the huge one is read past, and the peak memory does not follow it.
  const fs::path path = dir_ / "corpus.txt";
  {
    std::ofstream out(path, std::ios::binary);
    std::string chunk;
    for (int i = 0; i < (1 << 17); ++i) chunk += "the cat ";  // 1 MiB
    for (int i = 0; i < 64; ++i) out << chunk;
    out << "\u00e9\nthe dog ran\n";
  }
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  absl::StatusOr<Probe> probe = BuildTextProbe(path, *tokenizer_, BertFraming(*tokenizer_),
                                               TextMode::kLines, 128, 4, FileGate::Host());
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{2, 4, 5, 3}, {2, 4, 10, 3}}));
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 32 << 10) << "KiB of peak growth";
}

TEST_F(TextProbeTest, LinesStopAtMaxSamplesAndSkipTokenlessLines) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Write("\u200b\x07\nthe dog\nthe cat\n"), *tokenizer_, BertFraming(*tokenizer_),
                     TextMode::kLines, 1, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{2, 4, 10, 3}}));
  EXPECT_EQ(probe->description, "text corpus.txt lines 1x512");
}

TEST_F(TextProbeTest, SeqLenBelowThreeIsInvalid) {
  for (const TextMode mode : {TextMode::kWindows, TextMode::kLines}) {
    absl::StatusOr<Probe> probe = BuildTextProbe(
        Write(kText), *tokenizer_, BertFraming(*tokenizer_), mode, 128, 2, FileGate::Host());
    ASSERT_FALSE(probe.ok());
    EXPECT_EQ(probe.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(probe.status().message().find("seq_len"), std::string::npos);
  }
  EXPECT_TRUE(BuildTextProbe(Write(kText), *tokenizer_, BertFraming(*tokenizer_),
                             TextMode::kWindows, 128, 3, FileGate::Host())
                  .ok());
}

TEST_F(TextProbeTest, NonPositiveSamplesIsInvalid) {
  absl::StatusOr<Probe> probe = BuildTextProbe(Write(kText), *tokenizer_, BertFraming(*tokenizer_),
                                               TextMode::kLines, 0, 8, FileGate::Host());
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(probe.status().message().find("samples"), std::string::npos);
}

TEST_F(TextProbeTest, MissingFileIsNotFoundAndNamesTheFile) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(dir_ / "absent.txt", *tokenizer_, BertFraming(*tokenizer_), TextMode::kWindows,
                     128, 8, FileGate::Host());
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(probe.status().message().find("absent.txt"), std::string::npos);
}

TEST_F(TextProbeTest, FileWithoutTokensIsAnError) {
  for (const char* contents : {"", "\n\n  \r\n", "\u200b\n"}) {
    for (const TextMode mode : {TextMode::kWindows, TextMode::kLines}) {
      absl::StatusOr<Probe> probe = BuildTextProbe(
          Write(contents), *tokenizer_, BertFraming(*tokenizer_), mode, 128, 8, FileGate::Host());
      ASSERT_FALSE(probe.ok()) << '"' << contents << '"';
      EXPECT_EQ(probe.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(probe.status().message().find("corpus.txt"), std::string::npos);
    }
  }
}

// A fake causal-model tokenizer: one id per whitespace-separated word (its length).
class WordLengthTokenizer : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    std::istringstream words{std::string(text)};
    for (std::string word; words >> word;) ids.push_back(static_cast<int64_t>(word.size()));
    return ids;
  }
  int64_t vocab_size() const override { return 100; }
};

// A fake byte-level tokenizer: one id per byte; remembers the longest text it encoded.
class ByteTokenizer : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text) const override {
    longest_ = std::max(longest_, text.size());
    return std::vector<int64_t>(text.begin(), text.end());
  }
  int64_t vocab_size() const override { return 256; }
  size_t longest() const { return longest_; }

 private:
  mutable size_t longest_ = 0;
};

std::vector<int64_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

class UnframedTextProbeTest : public TextProbeTest {
 protected:
  WordLengthTokenizer bpe_;
  ByteTokenizer bytes_;
};

TEST_F(UnframedTextProbeTest, WindowsEncodeTheWholeTextWithUniversalNewlines) {
  // Blank and whitespace lines stay; "\r\n" and a lone "\r" are read as "\n".
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Write(" a\r\n\r\n  \r\nb\rc\r"), bytes_, SampleFraming{}, TextMode::kWindows,
                     128, 4, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{Bytes(" a\n\n"), Bytes("  \nb"), Bytes("\nc\n")}));
}

TEST_F(UnframedTextProbeTest, LinesModeStillDropsNewlinesAndBlankLines) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Write(" a\r\n\r\n  \r\nbc\n"), bytes_, SampleFraming{}, TextMode::kLines, 128,
                     4, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{Bytes(" a"), Bytes("bc")}));
}

TEST_F(UnframedTextProbeTest, WindowsReadOnlyAPrefixOfABigFile) {
  std::string text;
  while (text.size() < (size_t{8} << 20)) text += "word " + std::to_string(text.size()) + "\n";
  absl::StatusOr<Probe> probe = BuildTextProbe(Write(text), bytes_, SampleFraming{},
                                               TextMode::kWindows, 2, 100, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{Bytes(text.substr(0, 100)), Bytes(text.substr(100, 100))}));
  // The first prefix: 1 MiB, up to the end of a line.
  EXPECT_LE(bytes_.longest(), (size_t{1} << 20) + 16);
}

TEST_F(UnframedTextProbeTest, WindowsGrowThePrefixUntilTheyHaveEnoughIds) {
  // About 36 bytes per id: the prefixes of 1 MiB and 2 MiB hold too few of the 60000 ids
  // needed, 4 MiB enough, and the file (7 MB) is not read to its end.
  std::string text;
  for (int i = 0; i < 200000; ++i) text += std::string(30 + i % 10, 'x') + (i % 7 ? " " : "\n");
  const std::vector<int64_t> all = bpe_.Encode(text).value();
  absl::StatusOr<Probe> probe = BuildTextProbe(Write(text), bpe_, SampleFraming{},
                                               TextMode::kWindows, 60, 1000, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->samples.size(), 60u);
  EXPECT_EQ(probe->samples.back(), std::vector<int64_t>(all.begin() + 59000, all.begin() + 60000));
}

TEST_F(UnframedTextProbeTest, WindowsWithoutSpecialTokensHoldSeqLenTokens) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Write("a bb ccc\n\ndddd eeeee\n"), bpe_, SampleFraming{}, TextMode::kWindows,
                     128, 2, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{1, 2}, {3, 4}, {5}}));
  EXPECT_EQ(probe->description, "text corpus.txt windows 3x2");
}

TEST_F(UnframedTextProbeTest, LinesWithoutSpecialTokensAreTruncatedToSeqLen) {
  absl::StatusOr<Probe> probe =
      BuildTextProbe(Write("a bb ccc\n \ndddd eeeee\n"), bpe_, SampleFraming{}, TextMode::kLines,
                     128, 2, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{1, 2}, {4, 5}}));
}

TEST_F(UnframedTextProbeTest, SeqLenOfOneIsEnoughWithoutFraming) {
  absl::StatusOr<Probe> probe = BuildTextProbe(Write("a bb\n"), bpe_, SampleFraming{},
                                               TextMode::kWindows, 128, 1, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{1}, {2}}));
  EXPECT_FALSE(BuildTextProbe(Write("a bb\n"), bpe_, SampleFraming{}, TextMode::kWindows, 128, 0,
                              FileGate::Host())
                   .ok());
}

TEST_F(UnframedTextProbeTest, CustomFramingWrapsEverySample) {
  const SampleFraming framing{{90, 91}, {99}};
  absl::StatusOr<Probe> probe = BuildTextProbe(Write("a bb ccc\n"), bpe_, framing,
                                               TextMode::kWindows, 128, 5, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{90, 91, 1, 2, 99}, {90, 91, 3, 99}}));
  EXPECT_FALSE(
      BuildTextProbe(Write("a\n"), bpe_, framing, TextMode::kLines, 128, 3, FileGate::Host()).ok());
}

TEST(WikitextProbeTest, PaperProbeIs128FullWindowsOf512) {
  const char* shared = std::getenv("ANISOSCOPE_SHARED_DATA");
  if (shared == nullptr || *shared == '\0') {
    GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA is not set; skipping the wikitext-2 probe";
  }
  const fs::path vocab = fs::path(shared) / "tokenizers" / "bert-base-uncased" / "vocab.txt";
  const fs::path text = fs::path(shared) / "corpora" / "wikitext-2" / "wiki.test.raw";
  if (!fs::exists(vocab) || !fs::exists(text)) {
    GTEST_SKIP() << "bert-base-uncased vocab or wikitext-2 missing under " << shared;
  }
  auto tokenizer = WordPieceTokenizer::Create(vocab, {}, FileGate::Host());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::StatusOr<Probe> probe = BuildTextProbe(text, **tokenizer, BertFraming(**tokenizer),
                                               TextMode::kWindows, 128, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->samples.size(), 128u);
  for (const auto& sample : probe->samples) {
    ASSERT_EQ(sample.size(), 512u);
    EXPECT_EQ(sample.front(), 101);
    EXPECT_EQ(sample.back(), 102);
  }
  // " = Robert Boulter = " opens the test set.
  EXPECT_EQ(std::vector<int64_t>(probe->samples[0].begin(), probe->samples[0].begin() + 7),
            (std::vector<int64_t>{101, 1027, 2728, 8945, 11314, 2121, 1027}));
  EXPECT_EQ(probe->description, "text wiki.test.raw windows 128x512");
  EXPECT_EQ(probe->num_tokens(), 128 * 512);
}

}  // namespace
}  // namespace anisoscope::analysis
