// Alarm rules (server/alarms/alarm_rules.h): the TOML parser and its errors, the default set
// compiled in; and one rule against one step (server/alarms/alarm_evaluation.h).
#include "server/alarms/alarm_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/alarms/alarm_evaluation.h"
#include "tests/common/test_temp_dir.h"

namespace anisoscope::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The one rule of `text`; fails the test (and returns a default rule) on an error.
AlarmRule OnlyRule(const std::string& text) {
  const absl::StatusOr<std::vector<AlarmRule>> rules = ParseAlarmRules(text, "test.toml");
  EXPECT_TRUE(rules.ok()) << rules.status();
  if (!rules.ok() || rules->size() != 1) {
    ADD_FAILURE() << "expected one rule";
    return {};
  }
  return rules->front();
}

// The error of parsing `text` as "rules.toml"; fails the test when it parses.
std::string ErrorOf(const std::string& text) {
  const absl::StatusOr<std::vector<AlarmRule>> rules = ParseAlarmRules(text, "rules.toml");
  EXPECT_FALSE(rules.ok()) << "parsed: " << text;
  if (rules.ok()) return "";
  EXPECT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument) << rules.status();
  return std::string(rules.status().message());
}

// ---- Parsing ------------------------------------------------------------------------------

TEST(AlarmRulesTest, DefaultSetParsesWithItsFourRules) {
  const absl::StatusOr<std::vector<AlarmRule>> rules = LoadAlarmRules("");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 4u);
  const AlarmRule& collapse = (*rules)[0];
  EXPECT_EQ(collapse.name, "attention_entropy_collapse");
  EXPECT_EQ(collapse.metric, "attn_entropy");
  EXPECT_EQ(collapse.over, AlarmOver::kHeads);
  EXPECT_EQ(collapse.aggregate, AlarmAggregate::kMean);
  EXPECT_EQ(collapse.condition, AlarmCondition::kBelow);
  EXPECT_EQ(collapse.amount, 0.5);
  EXPECT_EQ(collapse.severity, "critical");
  EXPECT_THAT(collapse.summary, HasSubstr("Zhai"));

  const AlarmRule& drop = (*rules)[1];
  EXPECT_EQ(drop.name, "attention_entropy_drop");
  EXPECT_EQ(drop.condition, AlarmCondition::kFallBy);
  EXPECT_EQ(drop.amount, 0.5);
  EXPECT_EQ(drop.window, 1);

  const AlarmRule& growth = (*rules)[2];
  EXPECT_EQ(growth.name, "massive_activation_growth");
  EXPECT_EQ(growth.metric, "hidden_max_abs");
  EXPECT_EQ(growth.over, AlarmOver::kLayers);
  EXPECT_EQ(growth.aggregate, AlarmAggregate::kMax);
  EXPECT_EQ(growth.condition, AlarmCondition::kRiseBy);
  EXPECT_EQ(growth.amount, 1.0);

  const AlarmRule& representation = (*rules)[3];
  EXPECT_EQ(representation.name, "representation_collapse");
  EXPECT_EQ(representation.metric, "hidden_anisotropy");
  EXPECT_EQ(representation.condition, AlarmCondition::kAbove);
  EXPECT_EQ(representation.amount, 0.99);
  EXPECT_EQ(representation.severity, "warning");

  // The compiled-in text is the file users copy.
  EXPECT_THAT(std::string(DefaultAlarmRulesToml()),
              HasSubstr("name = \"representation_collapse\""));
}

TEST(AlarmRulesTest, EveryKeyIsRead) {
  const AlarmRule rule = OnlyRule(R"(
[[rule]]
name = "drop_3"
metric = "hidden_max_abs"
over = "layers"
aggregate = "max"
rise_by = 2
window = 5
severity = "critical"
summary = "grew"
)");
  EXPECT_EQ(rule.name, "drop_3");
  EXPECT_EQ(rule.metric, "hidden_max_abs");
  EXPECT_EQ(rule.over, AlarmOver::kLayers);
  EXPECT_EQ(rule.aggregate, AlarmAggregate::kMax);
  EXPECT_EQ(rule.condition, AlarmCondition::kRiseBy);
  EXPECT_EQ(rule.amount, 2.0);  // an integer is a number too
  EXPECT_EQ(rule.window, 5);
  EXPECT_EQ(rule.severity, "critical");
  EXPECT_EQ(rule.summary, "grew");
  EXPECT_EQ(rule.line, 2);
}

TEST(AlarmRulesTest, DefaultsAreHeadsMinWarningAndNoSummary) {
  const AlarmRule rule = OnlyRule("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nabove = 3\n");
  EXPECT_EQ(rule.over, AlarmOver::kHeads);
  EXPECT_EQ(rule.aggregate, AlarmAggregate::kMin);
  EXPECT_EQ(rule.condition, AlarmCondition::kAbove);
  EXPECT_EQ(rule.severity, "warning");
  EXPECT_EQ(rule.summary, "");
  EXPECT_EQ(rule.window, 1);
}

TEST(AlarmRulesTest, PerHiddenStateAndPerCheckpointMetricsAreAccepted) {
  EXPECT_EQ(
      OnlyRule("[[rule]]\nname = \"h\"\nmetric = \"hidden_anisotropy\"\nabove = 0.9\n").metric,
      "hidden_anisotropy");
  EXPECT_EQ(OnlyRule("[[rule]]\nname = \"c\"\nmetric = \"embed_partition_isotropy\"\nbelow = 0.1\n")
                .metric,
            "embed_partition_isotropy");
}

TEST(AlarmRulesTest, EmptyFileGivesNoRules) {
  for (const char* text : {"", "# only a comment\n", "\n\n"}) {
    const absl::StatusOr<std::vector<AlarmRule>> rules = ParseAlarmRules(text, "empty.toml");
    ASSERT_TRUE(rules.ok()) << rules.status();
    EXPECT_THAT(*rules, IsEmpty());
  }
}

TEST(AlarmRulesTest, UnknownKeyNamesItsLineAndTheKeys) {
  const std::string error = ErrorOf(R"([[rule]]
name = "a"
metric = "attn_entropy"
below = 0.5
treshold = 3
)");
  EXPECT_THAT(error, AllOf(HasSubstr("rules.toml"), HasSubstr("line 5"), HasSubstr("'treshold'"),
                           HasSubstr("fall_by")));
}

TEST(AlarmRulesTest, UnknownMetricListsTheMetrics) {
  const std::string error = ErrorOf(R"([[rule]]
name = "a"
metric = "attn_entropyy"
below = 0.5
)");
  EXPECT_THAT(error, AllOf(HasSubstr("rules.toml line 3"), HasSubstr("'metric'"),
                           HasSubstr("attn_entropyy"), HasSubstr("attn_first_token_mass"),
                           HasSubstr("hidden_max_abs"), HasSubstr("(rule 'a')")));
}

TEST(AlarmRulesTest, PerBlockMetricIsRefused) {
  const std::string error = ErrorOf(R"([[rule]]
name = "a"
metric = "qk_mean_cosine_concat"
below = 0.5
)");
  EXPECT_THAT(error, AllOf(HasSubstr("rules.toml line 3"), HasSubstr("'metric'"),
                           HasSubstr("qk_mean_cosine_concat")));
}

TEST(AlarmRulesTest, MissingMetricIsNamed) {
  EXPECT_THAT(ErrorOf("[[rule]]\nname = \"a\"\nbelow = 1\n"),
              AllOf(HasSubstr("rules.toml line 1"), HasSubstr("'metric' is missing")));
}

TEST(AlarmRulesTest, MissingOrMalformedNameIsNamed) {
  EXPECT_THAT(ErrorOf("[[rule]]\nmetric = \"attn_entropy\"\nbelow = 1\n"),
              AllOf(HasSubstr("line 1"), HasSubstr("'name' is missing")));
  EXPECT_THAT(ErrorOf("[[rule]]\nmetric = \"attn_entropy\"\nname = \"Bad-Name\"\nbelow = 1\n"),
              AllOf(HasSubstr("line 3"), HasSubstr("'name'"), HasSubstr("a-z, 0-9 and _")));
  EXPECT_THAT(ErrorOf("[[rule]]\nname = 3\nmetric = \"attn_entropy\"\nbelow = 1\n"),
              AllOf(HasSubstr("line 2"), HasSubstr("'name' must be a string")));
}

TEST(AlarmRulesTest, TwoConditionsAreRefused) {
  const std::string error = ErrorOf(R"(
[[rule]]
name = "a"
metric = "attn_entropy"
below = 0.5
above = 3
)");
  EXPECT_THAT(error, AllOf(HasSubstr("rules.toml line 2"), HasSubstr("below/above/fall_by/rise_by"),
                           HasSubstr("exactly once (2 given)"), HasSubstr("(rule 'a')")));
}

TEST(AlarmRulesTest, NoConditionIsRefused) {
  const std::string error = ErrorOf("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\n");
  EXPECT_THAT(error, AllOf(HasSubstr("rules.toml line 1"), HasSubstr("exactly once (0 given)")));
}

TEST(AlarmRulesTest, NonNumericOrNonFiniteThresholdIsRefused) {
  EXPECT_THAT(ErrorOf("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nbelow = \"0.5\"\n"),
              AllOf(HasSubstr("line 4"), HasSubstr("'below' must be a finite number")));
  EXPECT_THAT(ErrorOf("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nabove = inf\n"),
              AllOf(HasSubstr("line 4"), HasSubstr("'above' must be a finite number")));
  EXPECT_THAT(ErrorOf("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nabove = nan\n"),
              AllOf(HasSubstr("line 4"), HasSubstr("'above'")));
}

TEST(AlarmRulesTest, WindowOnThresholdRuleIsRefused) {
  const std::string error =
      ErrorOf("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nbelow = 0.5\nwindow = 3\n");
  EXPECT_THAT(error, AllOf(HasSubstr("rules.toml line 5"), HasSubstr("'window'"),
                           HasSubstr("fall_by and rise_by only")));
}

TEST(AlarmRulesTest, WindowOutOfRangeIsRefused) {
  for (const char* window : {"0", "-1", "101", "2.5", "\"3\""}) {
    const std::string error = ErrorOf(absl::StrCat(
        "[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nfall_by = 0.5\nwindow = ", window,
        "\n"));
    EXPECT_THAT(error,
                AllOf(HasSubstr("rules.toml line 5"), HasSubstr("'window'"), HasSubstr("1 to 100")))
        << window;
  }
  EXPECT_EQ(
      OnlyRule("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nfall_by = 0.5\nwindow = 100\n")
          .window,
      kMaxAlarmWindow);
}

TEST(AlarmRulesTest, NonPositiveRelativeAmountIsRefused) {
  for (const char* condition : {"fall_by = 0", "fall_by = -0.5", "rise_by = 0.0"}) {
    const std::string error = ErrorOf(
        absl::StrCat("[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\n", condition, "\n"));
    EXPECT_THAT(error, AllOf(HasSubstr("rules.toml line 4"), HasSubstr("must be a positive")))
        << condition;
  }
}

TEST(AlarmRulesTest, BadChoicesListTheChoices) {
  const std::string base = "[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nbelow = 1\n";
  EXPECT_THAT(ErrorOf(base + "over = \"blocks\"\n"),
              AllOf(HasSubstr("line 5"), HasSubstr("'over' is 'blocks'; one of heads, layers")));
  EXPECT_THAT(
      ErrorOf(base + "aggregate = \"median\"\n"),
      AllOf(HasSubstr("line 5"), HasSubstr("'aggregate' is 'median'; one of min, max, mean")));
  EXPECT_THAT(
      ErrorOf(base + "severity = \"page\"\n"),
      AllOf(HasSubstr("line 5"), HasSubstr("'severity' is 'page'; one of warning, critical")));
  EXPECT_THAT(ErrorOf(base + "severity = 2\n"),
              AllOf(HasSubstr("line 5"), HasSubstr("'severity' must be a string")));
}

TEST(AlarmRulesTest, DuplicateNameNamesTheLineOfTheSecond) {
  const std::string error = ErrorOf(R"([[rule]]
name = "a"
metric = "attn_entropy"
below = 0.5

[[rule]]
name = "a"
metric = "hidden_max_abs"
above = 5
)");
  EXPECT_THAT(error,
              AllOf(HasSubstr("rules.toml line 6"), HasSubstr("'a'"), HasSubstr("defined twice")));
}

TEST(AlarmRulesTest, MalformedTomlNamesItsLine) {
  const std::string error = ErrorOf(R"([[rule]]
name = "a"
metric = "attn_entropy"
below = = 0.5
)");
  EXPECT_THAT(error, HasSubstr("rules.toml line 4: "));
}

TEST(AlarmRulesTest, TopLevelKeyOtherThanRuleIsRefused) {
  EXPECT_THAT(
      ErrorOf("version = 1\n[[rule]]\nname = \"a\"\nmetric = \"attn_entropy\"\nbelow = 1\n"),
      AllOf(HasSubstr("rules.toml line 1"), HasSubstr("'version' is not known"),
            HasSubstr("[[rule]]")));
  EXPECT_THAT(ErrorOf("[[rules]]\nname = \"a\"\n"),
              AllOf(HasSubstr("line 1"), HasSubstr("'rules' is not known")));
}

TEST(AlarmRulesTest, RuleThatIsNotAnArrayOfTablesIsRefused) {
  EXPECT_THAT(ErrorOf("[rule]\nname = \"a\"\nmetric = \"attn_entropy\"\nbelow = 1\n"),
              AllOf(HasSubstr("rules.toml line 1"), HasSubstr("array of tables")));
  EXPECT_THAT(ErrorOf("rule = [1, 2]\n"),
              AllOf(HasSubstr("rules.toml line 1"), HasSubstr("must be a table")));
}

TEST(AlarmRulesTest, ErrorInTheSecondRuleNamesItsLine) {
  const std::string error = ErrorOf(R"([[rule]]
name = "a"
metric = "attn_entropy"
below = 0.5

[[rule]]
name = "b"
metric = "attn_entropy"
below = 0.5
over = "everything"
)");
  EXPECT_THAT(error, AllOf(HasSubstr("line 10"), HasSubstr("(rule 'b')")));
}

TEST(AlarmRulesTest, LoadReadsTheFile) {
  TestTempDir dir;
  const std::string path = dir.File("rules.toml");
  std::ofstream(path) << "[[rule]]\nname = \"always\"\nmetric = \"attn_entropy\"\nover = "
                         "\"heads\"\naggregate = \"min\"\nbelow = 1000.0\n";
  const absl::StatusOr<std::vector<AlarmRule>> rules = LoadAlarmRules(path);
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ(rules->front().name, "always");

  std::ofstream(path) << "[[rule]]\nname = \"x\"\n";  // errors name the file
  EXPECT_THAT(std::string(LoadAlarmRules(path).status().message()), HasSubstr(path));
}

TEST(AlarmRulesTest, LoadOfMissingFileIsNotFoundNamingThePath) {
  TestTempDir dir;
  const std::string path = dir.File("absent.toml");
  const absl::StatusOr<std::vector<AlarmRule>> rules = LoadAlarmRules(path);
  ASSERT_FALSE(rules.ok());
  EXPECT_EQ(rules.status().code(), absl::StatusCode::kNotFound) << rules.status();
  EXPECT_THAT(std::string(rules.status().message()), HasSubstr(path));
}

// A directory reads as nothing on Linux (the open succeeds, the read fails): it must not pass
// for an empty file, which would switch the alarms off without a word.
TEST(AlarmRulesTest, LoadOfDirectoryIsAnError) {
  TestTempDir dir;
  const absl::StatusOr<std::vector<AlarmRule>> rules = LoadAlarmRules(dir.path().string());
  EXPECT_FALSE(rules.ok()) << "a directory loaded as " << (rules.ok() ? rules->size() : 0)
                           << " rules";
}

TEST(AlarmRulesTest, NamesAreSpelledAsInTheFile) {
  EXPECT_EQ(AggregateName(AlarmAggregate::kMean), "mean");
  EXPECT_EQ(OverName(AlarmOver::kLayers), "layers");
  EXPECT_EQ(ConditionName(AlarmCondition::kFallBy), "fall_by");
  EXPECT_EQ(ConditionName(AlarmCondition::kRiseBy), "rise_by");
}

// ---- Evaluation ---------------------------------------------------------------------------

AlarmRule Rule(const std::string& metric, AlarmOver over, AlarmAggregate aggregate,
               AlarmCondition condition, double amount, int window = 1) {
  AlarmRule rule;
  rule.name = "r";
  rule.metric = metric;
  rule.over = over;
  rule.aggregate = aggregate;
  rule.condition = condition;
  rule.amount = amount;
  rule.window = window;
  return rule;
}

// attn_entropy of two layers with three heads each.
std::vector<storage::ScalarValue> Heads(const std::vector<std::vector<double>>& layers,
                                        const std::string& metric = "attn_entropy") {
  std::vector<storage::ScalarValue> values;
  for (size_t layer = 0; layer < layers.size(); ++layer) {
    for (size_t head = 0; head < layers[layer].size(); ++head) {
      values.push_back(
          {metric, static_cast<int>(layer), static_cast<int>(head), layers[layer][head]});
    }
  }
  return values;
}

storage::StepScalars At(int64_t step, const std::vector<std::vector<double>>& layers) {
  return {step, Heads(layers)};
}

MATCHER_P4(IsCheck, layer, value, reference, holds, "") {
  return arg.layer == layer && std::abs(arg.value - value) < 1e-12 &&
         std::abs(arg.reference - reference) < 1e-12 && arg.holds == holds;
}

TEST(AlarmEvaluationTest, AggregatesOverTheHeadsOfEachLayer) {
  const auto values = Heads({{1.0, 2.0, 6.0}, {0.5, 0.25, 0.75}});
  EXPECT_THAT(CheckRule(Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin,
                             AlarmCondition::kBelow, 0.4),
                        values, {}),
              ElementsAre(IsCheck(0, 1.0, 0.4, false), IsCheck(1, 0.25, 0.4, true)));
  EXPECT_THAT(CheckRule(Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMax,
                             AlarmCondition::kAbove, 1.0),
                        values, {}),
              ElementsAre(IsCheck(0, 6.0, 1.0, true), IsCheck(1, 0.75, 1.0, false)));
  EXPECT_THAT(CheckRule(Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMean,
                             AlarmCondition::kBelow, 3.0),
                        values, {}),
              ElementsAre(IsCheck(0, 3.0, 3.0, false), IsCheck(1, 0.5, 3.0, true)));
}

TEST(AlarmEvaluationTest, AggregatesOverEveryLayerAsLayerMinusOne) {
  const auto values = Heads({{1.0, 2.0, 6.0}, {0.5, 0.25, 0.75}});
  EXPECT_THAT(CheckRule(Rule("attn_entropy", AlarmOver::kLayers, AlarmAggregate::kMin,
                             AlarmCondition::kBelow, 0.3),
                        values, {}),
              ElementsAre(IsCheck(-1, 0.25, 0.3, true)));
  EXPECT_THAT(CheckRule(Rule("attn_entropy", AlarmOver::kLayers, AlarmAggregate::kMax,
                             AlarmCondition::kAbove, 6.0),
                        values, {}),
              ElementsAre(IsCheck(-1, 6.0, 6.0, false)));  // strictly above
  EXPECT_THAT(CheckRule(Rule("attn_entropy", AlarmOver::kLayers, AlarmAggregate::kMean,
                             AlarmCondition::kAbove, 1.0),
                        values, {}),
              ElementsAre(IsCheck(-1, 10.5 / 6, 1.0, true)));
}

TEST(AlarmEvaluationTest, PerHiddenStateMetricIsCheckedPerHiddenState) {
  const std::vector<storage::ScalarValue> values = {{"hidden_anisotropy", 0, -1, 0.9},
                                                    {"hidden_anisotropy", 1, -1, 0.95},
                                                    {"hidden_anisotropy", 2, -1, 0.98}};
  EXPECT_THAT(CheckRule(Rule("hidden_anisotropy", AlarmOver::kHeads, AlarmAggregate::kMax,
                             AlarmCondition::kAbove, 0.97),
                        values, {}),
              ElementsAre(IsCheck(0, 0.9, 0.97, false), IsCheck(1, 0.95, 0.97, false),
                          IsCheck(2, 0.98, 0.97, true)));
  EXPECT_THAT(CheckRule(Rule("hidden_anisotropy", AlarmOver::kLayers, AlarmAggregate::kMean,
                             AlarmCondition::kAbove, 0.97),
                        values, {}),
              ElementsAre(IsCheck(-1, (0.9 + 0.95 + 0.98) / 3, 0.97, false)));
}

TEST(AlarmEvaluationTest, PerCheckpointMetricIsOneValueAtLayerMinusOne) {
  const std::vector<storage::ScalarValue> values = {{"embed_partition_isotropy", -1, -1, 0.2}};
  for (const AlarmOver over : {AlarmOver::kHeads, AlarmOver::kLayers}) {
    EXPECT_THAT(CheckRule(Rule("embed_partition_isotropy", over, AlarmAggregate::kMin,
                               AlarmCondition::kBelow, 0.5),
                          values, {}),
                ElementsAre(IsCheck(-1, 0.2, 0.5, true)));
  }
}

TEST(AlarmEvaluationTest, NoValuesGiveNoChecks) {
  EXPECT_THAT(CheckRule(Rule("attn_entropy", AlarmOver::kLayers, AlarmAggregate::kMin,
                             AlarmCondition::kBelow, 0.5),
                        {}, {}),
              IsEmpty());
}

TEST(AlarmEvaluationTest, FallByComparesWithThePreviousStep) {
  const AlarmRule rule =
      Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMean, AlarmCondition::kFallBy, 0.5);
  // Layer 0 halves exactly (holds: <= -0.5), layer 1 falls by 40% (not enough).
  EXPECT_THAT(CheckRule(rule, Heads({{1.0, 1.0}, {3.0, 3.0}}),
                        {At(2, {{2.0, 2.0}, {5.0, 5.0}}), At(1, {{100.0, 100.0}, {100.0, 100.0}})}),
              ElementsAre(IsCheck(0, 1.0, 2.0, true), IsCheck(1, 3.0, 5.0, false)));
}

TEST(AlarmEvaluationTest, RiseByComparesWithThePreviousStep) {
  const AlarmRule rule =
      Rule("attn_entropy", AlarmOver::kLayers, AlarmAggregate::kMax, AlarmCondition::kRiseBy, 1.0);
  EXPECT_THAT(CheckRule(rule, Heads({{4.0, 1.0}}), {At(7, {{1.0, 2.0}})}),
              ElementsAre(IsCheck(-1, 4.0, 2.0, true)));
  EXPECT_THAT(CheckRule(rule, Heads({{3.9, 1.0}}), {At(7, {{1.0, 2.0}})}),
              ElementsAre(IsCheck(-1, 3.9, 2.0, false)));
}

TEST(AlarmEvaluationTest, NegativeReferenceComparesAgainstItsMagnitude) {
  const AlarmRule rule = Rule("qk_mean_cosine", AlarmOver::kLayers, AlarmAggregate::kMin,
                              AlarmCondition::kFallBy, 0.5);
  // -0.2 -> -0.4: (value - reference) / |reference| = -1, a fall; -0.2 -> -0.1 is a rise.
  EXPECT_THAT(
      CheckRule(rule, Heads({{-0.4}}, "qk_mean_cosine"), {{1, Heads({{-0.2}}, "qk_mean_cosine")}}),
      ElementsAre(IsCheck(-1, -0.4, -0.2, true)));
  EXPECT_THAT(
      CheckRule(rule, Heads({{-0.1}}, "qk_mean_cosine"), {{1, Heads({{-0.2}}, "qk_mean_cosine")}}),
      ElementsAre(IsCheck(-1, -0.1, -0.2, false)));
}

TEST(AlarmEvaluationTest, WindowComparesWithTheMeanOfThePreviousSteps) {
  const AlarmRule rule = Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin,
                              AlarmCondition::kFallBy, 0.5, /*window=*/3);
  // Reference: mean of 4, 2, 3 = 3; the fourth step back is outside the window.
  const std::vector<storage::StepScalars> history = {At(9, {{4.0}}), At(8, {{2.0}}), At(7, {{3.0}}),
                                                     At(6, {{1000.0}})};
  EXPECT_THAT(CheckRule(rule, Heads({{1.5}}), history), ElementsAre(IsCheck(0, 1.5, 3.0, true)));
  EXPECT_THAT(CheckRule(rule, Heads({{1.6}}), history), ElementsAre(IsCheck(0, 1.6, 3.0, false)));
}

TEST(AlarmEvaluationTest, PartialWindowUsesTheStepsThatExist) {
  const AlarmRule rule = Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin,
                              AlarmCondition::kFallBy, 0.5, /*window=*/5);
  EXPECT_THAT(CheckRule(rule, Heads({{1.0}}), {At(2, {{2.0}}), At(1, {{4.0}})}),
              ElementsAre(IsCheck(0, 1.0, 3.0, true)));
  // A layer that only some earlier steps have: the mean of those.
  EXPECT_THAT(CheckRule(rule, Heads({{10.0}, {1.0}}), {At(2, {{10.0}}), At(1, {{10.0}, {4.0}})}),
              ElementsAre(IsCheck(0, 10.0, 10.0, false), IsCheck(1, 1.0, 4.0, true)));
}

TEST(AlarmEvaluationTest, RelativeRuleWithoutHistoryGivesNoCheck) {
  for (const AlarmCondition condition : {AlarmCondition::kFallBy, AlarmCondition::kRiseBy}) {
    const AlarmRule rule =
        Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin, condition, 0.5);
    EXPECT_THAT(CheckRule(rule, Heads({{1.0}, {2.0}}), {}), IsEmpty());
    // Only layer 0 has history.
    EXPECT_THAT(CheckRule(rule, Heads({{1.0}, {2.0}}), {At(1, {{1.0}})}),
                ElementsAre(IsCheck(0, 1.0, 1.0, false)));
  }
}

TEST(AlarmEvaluationTest, ZeroReferenceIsSkipped) {
  const AlarmRule rule =
      Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin, AlarmCondition::kRiseBy, 1.0);
  EXPECT_THAT(CheckRule(rule, Heads({{5.0}, {5.0}}), {At(1, {{0.0}, {1.0}})}),
              ElementsAre(IsCheck(1, 5.0, 1.0, true)));
}

TEST(AlarmEvaluationTest, NanValuesAreIgnored) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const AlarmRule below =
      Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin, AlarmCondition::kBelow, 0.5);
  // A NaN head is left out of its layer's aggregate; an all-NaN layer is not checked.
  EXPECT_THAT(CheckRule(below, Heads({{nan, 0.4}, {nan, nan}}), {}),
              ElementsAre(IsCheck(0, 0.4, 0.5, true)));
  const AlarmRule mean =
      Rule("attn_entropy", AlarmOver::kLayers, AlarmAggregate::kMean, AlarmCondition::kAbove, 1.0);
  EXPECT_THAT(CheckRule(mean, Heads({{nan, 2.0}, {4.0}}), {}),
              ElementsAre(IsCheck(-1, 3.0, 1.0, true)));
  // NaN in the history is left out of the reference too.
  const AlarmRule fall =
      Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin, AlarmCondition::kFallBy, 0.5);
  EXPECT_THAT(CheckRule(fall, Heads({{1.0}}), {At(1, {{nan, 2.0}})}),
              ElementsAre(IsCheck(0, 1.0, 2.0, true)));
  EXPECT_THAT(CheckRule(fall, Heads({{1.0}}), {At(1, {{nan}})}), IsEmpty());
}

TEST(AlarmEvaluationTest, DescribeThresholdCheckHasTheNumbers) {
  AlarmRule rule =
      Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin, AlarmCondition::kBelow, 0.5);
  rule.summary = "collapse";
  const std::string text = DescribeCheck(rule, {1, 0.31, 0.5, true});
  EXPECT_EQ(text, "min attn_entropy over the heads of layer 1 is 0.31, below 0.5: collapse");
  rule.condition = AlarmCondition::kAbove;
  rule.summary = "";
  EXPECT_EQ(DescribeCheck(rule, {-1, 7.25, 3, true}),
            "min attn_entropy over every layer is 7.25, above 3");
}

TEST(AlarmEvaluationTest, DescribeHiddenStateCheckNamesTheHiddenState) {
  const AlarmRule rule = Rule("hidden_anisotropy", AlarmOver::kHeads, AlarmAggregate::kMax,
                              AlarmCondition::kAbove, 0.99);
  EXPECT_THAT(DescribeCheck(rule, {2, 0.995, 0.99, true}),
              AllOf(HasSubstr("at hidden state 2"), HasSubstr("0.995"), HasSubstr("0.99")));
  EXPECT_THAT(DescribeCheck(rule, {-1, 0.995, 0.99, true}), HasSubstr("over every hidden state"));
}

TEST(AlarmEvaluationTest, DescribeRelativeCheckHasTheChangeAndReference) {
  AlarmRule rule =
      Rule("attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMean, AlarmCondition::kFallBy, 0.5);
  EXPECT_THAT(DescribeCheck(rule, {0, 1.0, 4.0, true}),
              AllOf(HasSubstr("is 1,"), HasSubstr("down 75%"), HasSubstr("the previous step"),
                    HasSubstr("(4)")));
  rule.condition = AlarmCondition::kRiseBy;
  rule.window = 5;
  EXPECT_THAT(
      DescribeCheck(rule, {0, 6.0, 2.0, true}),
      AllOf(HasSubstr("up 200%"), HasSubstr("the mean of the previous 5 steps"), HasSubstr("(2)")));
}

}  // namespace
}  // namespace anisoscope::server
