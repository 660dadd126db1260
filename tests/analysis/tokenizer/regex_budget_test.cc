// A tokenizer.json's Split regex is untrusted: a pattern that backtracks fails the text it
// encodes within the regex budget (regex_splitter.h), naming the file and the pattern's
// field, never quoting the text; real patterns stay exact (tokenizer_golden_test.cc).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/tokenizer/bpe_tokenizer.h"
#include "analysis/tokenizer/regex_splitter.h"
#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using internal::RegexBudget;
using internal::RegexSplitter;

// The bound every test here allows a hostile text: generous, the budget is ~0.5 s.
constexpr auto kGenerous = std::chrono::seconds(5);

// A byte-level BPE whose pre-tokenizer is `pre_tokenizer` (JSON).
std::string TokenizerJson(const std::string& pre_tokenizer) {
  return R"({"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": )" +
         pre_tokenizer +
         R"(, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "aa": 3},
                        "merges": ["a a"]}})";
}

std::string SplitStep(const std::string& regex) {
  return R"({"type": "Split", "pattern": {"Regex": ")" + regex +
         R"("}, "behavior": "Isolated", "invert": false})";
}

class RegexBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("regex_budget_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<BpeTokenizer> Load(const std::string& pre_tokenizer) {
    const fs::path file = dir_ / "tokenizer.json";
    std::ofstream(file, std::ios::binary) << TokenizerJson(pre_tokenizer);
    auto tokenizer = BpeTokenizer::FromTokenizerJson(file, FileGate::Host());
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }

  // Encodes `text`, which must fail within kGenerous with the budget's error naming the
  // file and `field`, and quoting none of the text.
  void ExpectBudgetError(const BpeTokenizer& tokenizer, const std::string& text,
                         const std::string& field, const std::string& bound) {
    const auto start = std::chrono::steady_clock::now();
    const absl::StatusOr<std::vector<int64_t>> ids = tokenizer.Encode(text);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, kGenerous);
    ASSERT_FALSE(ids.ok());
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument) << ids.status();
    const std::string message(ids.status().message());
    for (const std::string& needle : {(dir_ / "tokenizer.json").string(), "field '" + field + "'",
                                      std::string("budget"), bound}) {
      EXPECT_NE(message.find(needle), std::string::npos) << message << " lacks " << needle;
    }
    EXPECT_EQ(message.find("aaaa"), std::string::npos) << message;
  }

  fs::path dir_;
};

// The finding of issue 37: every start position costs O(n^2), in one search (the step
// stayed RUNNING for ever). Now the search's retry limit stops it.
TEST_F(RegexBudgetTest, ABacktrackingSplitFailsItsTextNamingTheFileAndPatternField) {
  auto tokenizer = Load(SplitStep("a*a*(?:c|$)"));
  ASSERT_NE(tokenizer, nullptr);
  ExpectBudgetError(*tokenizer, std::string(2500, 'a') + "b", "pre_tokenizer.pattern",
                    "backtracking retries in one search");
}

// Each search stays under its retry limit, but there is one per character: the text's
// budget across searches stops it (unbounded, it takes ~10 s here; longer texts, hours).
TEST_F(RegexBudgetTest, ManyCostlySearchesFailOnTheWholeTextsBudget) {
  auto tokenizer = Load(R"({"type": "Sequence", "pretokenizers": [)" + SplitStep("a*a*c|a") +
                        R"(, {"type": "ByteLevel", "use_regex": false}]})");
  ASSERT_NE(tokenizer, nullptr);
  ExpectBudgetError(*tokenizer, std::string(3000, 'a'), "pre_tokenizer.pretokenizers[0].pattern",
                    "s of searching");
}

TEST_F(RegexBudgetTest, TheSameTokenizerEncodesOrdinaryTextExactly) {
  auto tokenizer = Load(SplitStep("a*a*(?:c|$)"));
  ASSERT_NE(tokenizer, nullptr);
  const absl::StatusOr<std::vector<int64_t>> ids = tokenizer->Encode("aabaac");
  ASSERT_TRUE(ids.ok()) << ids.status();
  // Words "aab" (the gap) and "aac" (the match); "a a" merges.
  EXPECT_EQ(*ids, (std::vector<int64_t>{3, 1, 3, 2}));
}

TEST(RegexSplitterTest, SearchingIsAddedToTheBudgetAndCheckedAcrossCalls) {
  absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter = RegexSplitter::Create("a*a*c|a");
  ASSERT_TRUE(splitter.ok()) << splitter.status();
  RegexBudget budget = RegexBudget::ForText(100);
  const std::string text(100, 'a');
  absl::StatusOr<std::vector<std::string_view>> pieces = (*splitter)->Split(text, &budget);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  EXPECT_EQ(pieces->size(), 100u);
  EXPECT_GT(budget.spent.count(), 0);
  // A budget already spent refuses the next text after a few searches.
  budget.spent = budget.allowed;
  pieces = (*splitter)->Split(text, &budget);
  ASSERT_FALSE(pieces.ok());
  EXPECT_NE(pieces.status().message().find("s of searching"), std::string::npos) << pieces.status();
}

TEST(RegexSplitterTest, TheBudgetGrowsWithTheText) {
  EXPECT_EQ(RegexBudget::ForText(10).retries_per_search, RegexBudget::kMinRetriesPerSearch);
  EXPECT_EQ(RegexBudget::ForText(size_t{1} << 20).retries_per_search, 32ul << 20);
  EXPECT_GT(RegexBudget::ForText(size_t{1} << 20).allowed, RegexBudget::ForText(10).allowed);
}

}  // namespace
}  // namespace anisoscope::analysis
