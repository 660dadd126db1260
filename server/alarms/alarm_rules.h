// Training-health alarm rules: what the server checks each time a step is stored
// (docs/alarms.md). Read from a TOML file (--alarm-rules) or the default set compiled in from
// deploy/alarms/default_rules.toml. Plain data and a parser; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::server {

// Which values of a step one aggregate is taken over: kHeads, the heads of each layer (one
// value per layer; a per-hidden-state metric's own value per hidden state); kLayers, every
// layer and head (one value per step).
enum class AlarmOver { kHeads, kLayers };
enum class AlarmAggregate { kMin, kMax, kMean };
// kBelow / kAbove compare with `amount`; kFallBy / kRiseBy with the mean of the aggregate at
// the `window` previous stored steps: (value - reference) / |reference| <= -amount, >= amount.
enum class AlarmCondition { kBelow, kAbove, kFallBy, kRiseBy };

struct AlarmRule {
  std::string name;    // [a-z0-9_]+, unique within the set
  std::string metric;  // a stored scalar metric (METRICS.md)
  AlarmOver over = AlarmOver::kHeads;
  AlarmAggregate aggregate = AlarmAggregate::kMin;
  AlarmCondition condition = AlarmCondition::kBelow;
  double amount = 0;
  int window = 1;                    // previous steps a kFallBy / kRiseBy compares with
  std::string severity = "warning";  // warning or critical
  std::string summary;               // what it means, for a human
  int line = 0;                      // where the rule starts in its file
};

// The largest `window` a rule may ask for (the steps read back each time a step is stored).
inline constexpr int kMaxAlarmWindow = 100;

// The rules of TOML `text` (an array of tables [[rule]]); INVALID_ARGUMENT naming `source`,
// the line and the key for a malformed rule, an unknown key or metric, or a duplicate name.
absl::StatusOr<std::vector<AlarmRule>> ParseAlarmRules(std::string_view text,
                                                       std::string_view source);

// The default set (deploy/alarms/default_rules.toml, compiled in).
std::string_view DefaultAlarmRulesToml();

// The rules of file `path` (--alarm-rules), or the default set when `path` is empty.
// NOT_FOUND when the file cannot be read; ParseAlarmRules' errors.
absl::StatusOr<std::vector<AlarmRule>> LoadAlarmRules(const std::string& path);

// "min", "heads", "below", ... as the rule file spells them.
std::string_view AggregateName(AlarmAggregate aggregate);
std::string_view OverName(AlarmOver over);
std::string_view ConditionName(AlarmCondition condition);

}  // namespace anisoscope::server
