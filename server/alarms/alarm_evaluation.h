// One rule against one stored step: the aggregate per layer (or over all) and whether the
// rule's condition holds there. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "server/alarms/alarm_rules.h"
#include "storage/types.h"

namespace anisoscope::server {

struct AlarmCheck {
  int layer = -1;  // -1 for a rule over layers (or a per-checkpoint metric)
  double value = 0;
  double reference = 0;  // the threshold, or the mean of the earlier aggregates
  bool holds = false;
};

// `current`: the rule's metric at the step; `history`: at the previous stored steps, most
// recent first (only `rule.window` are used). A relative rule is not checked for a layer
// without history or whose reference is 0; a NaN value never holds.
std::vector<AlarmCheck> CheckRule(const AlarmRule& rule,
                                  const std::vector<storage::ScalarValue>& current,
                                  const std::vector<storage::StepScalars>& history);

// "min attn_entropy over the heads of layer 1 is 0.31, below 0.5".
std::string DescribeCheck(const AlarmRule& rule, const AlarmCheck& check);

}  // namespace anisoscope::server
