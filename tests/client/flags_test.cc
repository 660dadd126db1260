#include "client/flags.h"

#include <gtest/gtest.h>

namespace anisoscope::client {
namespace {

CommandSpec TestSpec() {
  CommandSpec spec;
  spec.name = "demo";
  spec.synopsis = "--run NAME";
  spec.summary = "a demo command";
  spec.flags = {StringFlag("run", "NAME", "the run"),
                RepeatedFlag("checkpoint", "STEP=PATH", "one checkpoint"),
                IntFlag("samples", "N", "samples", 1, 1000),
                IntFlag("from-step", "A", "first step"),
                BoolFlag("force", "recompute"),
                ChoiceFlag("format", {"table", "csv"}, "output format")};
  return spec;
}

CommandSpec JobSpec() {
  CommandSpec spec = TestSpec();
  spec.positionals = {{"JOB", "the job"}};
  return spec;
}

std::string ErrorOf(const CommandSpec& spec, const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(spec, args);
  EXPECT_FALSE(parsed.ok());
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(FlagsTest, AcceptsSpaceAndEqualsForms) {
  auto parsed = ParseArgs(TestSpec(), {"--run", "a", "--samples=12", "--force"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->GetString("run"), "a");
  EXPECT_EQ(parsed->GetInt("samples"), 12);
  EXPECT_TRUE(parsed->Has("force"));
  EXPECT_FALSE(parsed->Has("format"));
  EXPECT_EQ(parsed->GetString("format", "table"), "table");
}

TEST(FlagsTest, RepeatedFlagKeepsEveryValueInOrder) {
  auto parsed = ParseArgs(TestSpec(), {"--checkpoint", "1=a", "--checkpoint=2=b"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->GetAll("checkpoint"), (std::vector<std::string>{"1=a", "2=b"}));
}

TEST(FlagsTest, LastValueOfASingleFlagWins) {
  auto parsed = ParseArgs(TestSpec(), {"--run", "a", "--run", "b"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->GetString("run"), "b");
}

TEST(FlagsTest, UnknownFlagIsNamed) {
  EXPECT_EQ(ErrorOf(TestSpec(), {"--bogus", "1"}),
            "unknown flag --bogus for 'demo' (see 'anisoscope demo --help')");
  EXPECT_EQ(ErrorOf(TestSpec(), {"-x"}),
            "unknown flag -x for 'demo' (see 'anisoscope demo --help')");
}

TEST(FlagsTest, MissingValueNamesTheFlag) {
  EXPECT_EQ(ErrorOf(TestSpec(), {"--run"}), "--run requires a value (NAME)");
  EXPECT_EQ(ErrorOf(TestSpec(), {"--run", "--force"}), "--run requires a value (NAME)");
  EXPECT_EQ(ErrorOf(TestSpec(), {"--run="}), "--run: value is empty");
}

TEST(FlagsTest, BadNumberNamesTheFlag) {
  EXPECT_EQ(ErrorOf(TestSpec(), {"--samples", "ten"}), "--samples: expected an integer, got 'ten'");
  EXPECT_EQ(ErrorOf(TestSpec(), {"--samples=1.5"}), "--samples: expected an integer, got '1.5'");
  EXPECT_EQ(ErrorOf(TestSpec(), {"--samples", "0"}), "--samples: must be at least 1, got 0");
  EXPECT_EQ(ErrorOf(TestSpec(), {"--samples", "4294967297"}),
            "--samples: must be at most 1000, got 4294967297");
  EXPECT_EQ(ErrorOf(TestSpec(), {"--samples", "99999999999999999999"}),
            "--samples: expected an integer, got '99999999999999999999'");
}

TEST(FlagsTest, NegativeNumberIsAValueNotAFlag) {
  auto parsed = ParseArgs(TestSpec(), {"--from-step", "-5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->GetInt("from-step"), -5);
}

TEST(FlagsTest, BoolFlagTakesNoValue) {
  EXPECT_EQ(ErrorOf(TestSpec(), {"--force=yes"}), "--force takes no value");
}

TEST(FlagsTest, ChoiceFlagRejectsOtherValues) {
  EXPECT_EQ(ErrorOf(TestSpec(), {"--format", "xml"}),
            "--format: expected one of table, csv; got 'xml'");
}

TEST(FlagsTest, HelpAnywhereSkipsOtherChecks) {
  auto parsed = ParseArgs(JobSpec(), {"--bogus", "-h"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help());
  parsed = ParseArgs(JobSpec(), {"--help"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help());
}

TEST(FlagsTest, PositionalsAreCheckedAndDoubleDashEndsFlags) {
  auto parsed = ParseArgs(JobSpec(), {"--force", "7"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->positionals(), std::vector<std::string>{"7"});
  parsed = ParseArgs(JobSpec(), {"--", "--help"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->help());
  EXPECT_EQ(parsed->positionals(), std::vector<std::string>{"--help"});
  EXPECT_EQ(ErrorOf(JobSpec(), {}), "demo: missing JOB (see 'anisoscope demo --help')");
  EXPECT_EQ(ErrorOf(JobSpec(), {"1", "2"}),
            "demo: unexpected argument '2' (see 'anisoscope demo --help')");
}

TEST(FlagsTest, UsageListsEveryFlagWithItsValueName) {
  const std::string usage = CommandUsage(JobSpec());
  EXPECT_EQ(usage.rfind("usage: anisoscope [--server HOST:PORT] demo --run NAME\n", 0), 0u)
      << usage;
  for (const char* expected : {"  JOB ", "--run NAME ", "--checkpoint STEP=PATH ", "--samples N ",
                               "--force ", "--format table|csv ", "-h, --help "}) {
    EXPECT_NE(usage.find(expected), std::string::npos) << expected << "\n" << usage;
  }
}

TEST(FlagsTest, ParseInt64RejectsJunk) {
  int64_t value = 0;
  EXPECT_TRUE(ParseInt64("-12", &value));
  EXPECT_EQ(value, -12);
  for (const char* bad : {"", "-", "+1", "1e3", " 1", "0x10"}) {
    EXPECT_FALSE(ParseInt64(bad, &value)) << bad;
  }
}

}  // namespace
}  // namespace anisoscope::client
