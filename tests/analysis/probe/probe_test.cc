// Probe ids, Probe accessors and token-id probe files.
#include "analysis/probe/probe.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/process_memory.h"
#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using Samples = std::vector<std::vector<int64_t>>;


class TokenProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("token_probe_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& contents) {
    const fs::path path = dir_ / "probe.jsonl";
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  // The error of reading `contents`; INVALID_ARGUMENT expected.
  std::string ErrorOf(const std::string& contents, int64_t max_samples = 128,
                      int64_t seq_len = 512) {
    absl::StatusOr<Probe> probe =
        ReadTokenProbe(Write(contents), max_samples, seq_len, FileGate::Host());
    EXPECT_FALSE(probe.ok());
    EXPECT_EQ(probe.status().code(), absl::StatusCode::kInvalidArgument) << probe.status();
    return std::string(probe.status().message());
  }

  fs::path dir_;
};

// The first 128 bits of SHA-256, as python3 computes them:
// hashlib.sha256(b''.join(struct.pack('<q', v) for v in (2, 3, 101, 7592, 102, 4, ...))).
TEST(ProbeIdTest, IsStableForAFixedProbe) {
  EXPECT_EQ(ComputeProbeId({{101, 7592, 102}, {101, 2088, 999, 102}}),
            "p64a4dd9e09716f599018a03f4071f8e5");
  EXPECT_EQ(ComputeProbeId({}), "paf5570f5a1810b7af78caf4bc70a660f");
}

TEST(ProbeIdTest, IsPAndThirtyTwoLowercaseHexDigits) {
  const std::string id = ComputeProbeId({{1, 2, 3}});
  ASSERT_EQ(id.size(), 33u);
  EXPECT_EQ(id[0], 'p');
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 1), std::string::npos);
}

TEST(ProbeIdTest, ChangesWithAnyChangeToTheSamples) {
  const Samples base = {{101, 7592, 102}, {101, 2088, 102}};
  const std::string id = ComputeProbeId(base);
  const Samples variants[] = {
      {{101, 7593, 102}, {101, 2088, 102}},                       // one id
      {{101, 2088, 102}, {101, 7592, 102}},                       // sample order
      {{101, 7592, 102}},                                         // a sample dropped
      {{101, 7592, 102}, {101, 2088, 102}, {}},                   // an empty sample added
      {{101, 7592, 102, 101}, {2088, 102}},                       // same ids, other split
      {{101, 7592}, {101, 2088, 102}},                            // a token dropped
      {{101, 7592, 102}, {101, 2088, 102 + (int64_t{1} << 32)}},  // high bytes
  };
  for (const Samples& variant : variants) EXPECT_NE(ComputeProbeId(variant), id);
  EXPECT_EQ(ComputeProbeId(base), id);
}

TEST(ProbeTest, NumTokensSumsAndMaxLengthTakesTheLongest) {
  Probe probe;
  EXPECT_EQ(probe.num_tokens(), 0);
  EXPECT_EQ(probe.max_length(), 0);
  probe.samples = {{1, 2, 3}, {4}, {5, 6}};
  EXPECT_EQ(probe.num_tokens(), 6);
  EXPECT_EQ(probe.max_length(), 3);
}

TEST_F(TokenProbeTest, ReadsOneSamplePerLineSkippingBlankLines) {
  absl::StatusOr<Probe> probe =
      ReadTokenProbe(Write("[101, 7592, 102]\n\n  \n[5,6]\n"), 128, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{101, 7592, 102}, {5, 6}}));
  EXPECT_EQ(probe->id, ComputeProbeId(probe->samples));
  EXPECT_EQ(probe->description, "tokens probe.jsonl 2 samples");
}

TEST_F(TokenProbeTest, AcceptsCrLfAndNoFinalNewline) {
  absl::StatusOr<Probe> probe =
      ReadTokenProbe(Write("[1,2]\r\n\r\n[3]"), 128, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{1, 2}, {3}}));
}

TEST_F(TokenProbeTest, TakesTheFirstMaxSamplesAndIgnoresTheRest) {
  // Lines past max_samples are not read, so an error there does not matter.
  absl::StatusOr<Probe> probe =
      ReadTokenProbe(Write("[1]\n[2]\n[3]\nnot json\n"), 2, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{1}, {2}}));
  EXPECT_EQ(probe->description, "tokens probe.jsonl 2 samples");
}

TEST_F(TokenProbeTest, TruncatesEachSampleToSeqLen) {
  absl::StatusOr<Probe> probe =
      ReadTokenProbe(Write("[1,2,3,4,5]\n[6,7]\n"), 128, 3, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{1, 2, 3}, {6, 7}}));
  EXPECT_EQ(probe->max_length(), 3);
}

TEST_F(TokenProbeTest, TheReadStopsAtMaxTokensCountingTruncatedSamples) {
  const fs::path file = Write("[1,2,3,4,5]\n[6,7]\n[8,9,10]\n");
  // Cut to 3, the samples hold 3 + 2 + 3 ids.
  ASSERT_TRUE(ReadTokenProbe(file, 128, 3, FileGate::Host(), 8).ok());
  absl::StatusOr<Probe> over = ReadTokenProbe(file, 128, 3, FileGate::Host(), 7);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_NE(over.status().message().find("line 3"), std::string::npos) << over.status();
  // The first two lines only: within the bound.
  EXPECT_TRUE(ReadTokenProbe(file, 2, 512, FileGate::Host(), 7).ok());
}

TEST_F(TokenProbeTest, ALineLongerThanTheBoundAllowsIsRefusedUnread) {
  // One id padded to 1 MiB: past kMaxBytesPerTokenId per id still allowed.
  const fs::path file = Write("[1]\n[" + std::string(1 << 20, ' ') + "2]\n");
  absl::StatusOr<Probe> probe = ReadTokenProbe(file, 128, 512, FileGate::Host(), 100);
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kResourceExhausted) << probe.status();
  EXPECT_NE(probe.status().message().find("line 2"), std::string::npos) << probe.status();
  EXPECT_TRUE(ReadTokenProbe(file, 128, 512, FileGate::Host()).ok());  // no bound
}

TEST_F(TokenProbeTest, LargeIdsUpToInt64MaxAreKept) {
  absl::StatusOr<Probe> probe =
      ReadTokenProbe(Write("[0, 9223372036854775807]\n"), 1, 8, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{0, INT64_MAX}}));
}

TEST_F(TokenProbeTest, MissingFileIsNotFoundAndNamesTheFile) {
  absl::StatusOr<Probe> probe = ReadTokenProbe(dir_ / "absent.jsonl", 128, 512, FileGate::Host());
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(probe.status().message().find("absent.jsonl"), std::string::npos);
}

TEST_F(TokenProbeTest, EmptyFileIsAnError) {
  EXPECT_NE(ErrorOf("").find("probe.jsonl"), std::string::npos);
  EXPECT_NE(ErrorOf("\n  \n\r\n").find("no samples"), std::string::npos);
}

TEST_F(TokenProbeTest, MalformedJsonLineNamesFileAndLine) {
  const std::string error = ErrorOf("[1]\n\n[2,\n");
  EXPECT_NE(error.find("probe.jsonl line 3: not valid JSON"), std::string::npos) << error;
}

// Found by token_probe_fuzzer: a number too large for a double made nlohmann-json throw
// out_of_range, which nothing caught (the worker died).
TEST_F(TokenProbeTest, NumberBeyondDoubleRangeIsMalformedJsonNotACrash) {
  const std::string error = ErrorOf("[1]\n1e91919149\r\r\n");
  EXPECT_NE(error.find("probe.jsonl line 2: not valid JSON"), std::string::npos) << error;
}

TEST_F(TokenProbeTest, NonArrayLineNamesFileAndLine) {
  const std::string error = ErrorOf("[1]\n{\"ids\": [1]}\n");
  EXPECT_NE(error.find("probe.jsonl line 2: expected a JSON array"), std::string::npos) << error;
  EXPECT_NE(ErrorOf("7\n").find("line 1: expected a JSON array"), std::string::npos);
}

TEST_F(TokenProbeTest, EmptyArrayIsAnErrorNamingTheLine) {
  const std::string error = ErrorOf("[1]\n[]\n");
  EXPECT_NE(error.find("probe.jsonl line 2: empty array"), std::string::npos) << error;
}

TEST_F(TokenProbeTest, NegativeIdNamesLineAndElement) {
  const std::string error = ErrorOf("[1]\n[1]\n[0,1,2,3,4,-5]\n");
  EXPECT_NE(error.find("probe.jsonl line 3: element 5 is not a non-negative integer"),
            std::string::npos)
      << error;
}

TEST_F(TokenProbeTest, NonIntegerIdsAreErrorsNamingTheElement) {
  EXPECT_NE(ErrorOf("[1, 2.5]\n").find("line 1: element 1 is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[\"7\"]\n").find("line 1: element 0 is not"), std::string::npos);
  EXPECT_NE(ErrorOf("[[1]]\n").find("line 1: element 0 is not"), std::string::npos);
  EXPECT_NE(ErrorOf("[true]\n").find("line 1: element 0 is not"), std::string::npos);
  EXPECT_NE(ErrorOf("[null]\n").find("line 1: element 0 is not"), std::string::npos);
  EXPECT_NE(ErrorOf("[1e3]\n").find("line 1: element 0 is not"), std::string::npos);
  EXPECT_NE(ErrorOf("[9223372036854775808]\n").find("line 1: element 0 is not"), std::string::npos);
}

// Issue 37: 16 lines of 8 MB cost +653 MiB per submit (each line a JSON tree, each sample
// kept whole). Each line is now parsed as read and cut to seq_len: memory for the kept ids.
TEST_F(TokenProbeTest, HugeLinesAreCutToSeqLenAsReadNotHeldWhole) {
  std::string line = "[7";
  for (int i = 0; i < (1 << 20); ++i) line += ",1";
  line += "]\n";
  {
    std::ofstream out(dir_ / "probe.jsonl", std::ios::binary);
    for (int i = 0; i < 16; ++i) out << line;
  }
  line = std::string();
  const int64_t peak_before = PeakResidentBytes();
  absl::StatusOr<Probe> probe =
      ReadTokenProbe(dir_ / "probe.jsonl", 128, 4, FileGate::Host(), 262144);
  const int64_t growth = PeakResidentBytes() - peak_before;
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, Samples(16, {7, 1, 1, 1}));
  // Before: a tree of 1M values and 1M ids per line, 16 lines: hundreds of MiB.
  EXPECT_LT(growth, 16 << 20) << "peak RSS grew by " << growth << " bytes";
}

TEST_F(TokenProbeTest, WithoutALengthTheReadStopsAtTheBoundHoldingNoMore) {
  std::string line = "[1";
  for (int i = 0; i < 100000; ++i) line += ",2";
  const absl::StatusOr<Probe> probe =
      ReadTokenProbe(Write("[3]\n" + line + "]\n"), 128, std::numeric_limits<int64_t>::max(),
                     FileGate::Host(), 1000);
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kResourceExhausted) << probe.status();
  EXPECT_NE(probe.status().message().find("line 2"), std::string::npos) << probe.status();
}

TEST_F(TokenProbeTest, ErrorsNameTheLineWithoutQuotingIt) {
  for (const char* contents :
       {"[1, \"secret\"]\n", "{\"secret\": [1]}\n", "[1, secret]\n", "[1] secret\n"}) {
    const std::string error = ErrorOf(contents);
    EXPECT_NE(error.find("probe.jsonl line 1: "), std::string::npos) << error;
    EXPECT_EQ(error.find("secret"), std::string::npos) << error;
  }
}

TEST_F(TokenProbeTest, JsonDetailsAreReadAsNlohmannJsonReadThem) {
  absl::StatusOr<Probe> probe = ReadTokenProbe(Write("\xEF\xBB\xBF[1,2]\n \t[ 3 ,\t4 ] \r\n[-0]\n"),
                                               128, 512, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples, (Samples{{1, 2}, {3, 4}, {0}}));
  for (const char* malformed :
       {"[1,]\n", "[01]\n", "[1 2]\n", "[1\n", "[-]\n", "[1]]\n", "\v[1]\n", "[+1]\n"}) {
    EXPECT_NE(ErrorOf(malformed).find("line 1: not valid JSON"), std::string::npos) << malformed;
  }
  EXPECT_NE(ErrorOf("\"ids\"\n").find("line 1: expected a JSON array of token ids, got string"),
            std::string::npos);
}

TEST_F(TokenProbeTest, NonPositiveSamplesOrSeqLenIsInvalid) {
  const fs::path file = Write("[1]\n");
  EXPECT_EQ(ReadTokenProbe(file, 0, 512, FileGate::Host()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenProbe(file, 128, 0, FileGate::Host()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenProbe(file, -1, 512, FileGate::Host()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope::analysis
