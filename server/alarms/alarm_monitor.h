// AlarmMonitor: checks the alarm rules each time a step is stored, keeps the alarms they fire
// and resolve in the store, and holds the per-run gauges /metrics exports.
//
// Steps are checked in the order they are stored. An alarm fires for (run, probe, rule,
// layer) when its rule holds at a step and none is firing there; it resolves at the first
// later step where the rule no longer holds, or whose rules no longer have it (never at a
// step before the one it fired at).
//
// One alarm per event, (run, probe, rule, layer, step fired): a step stored again (a --force
// re-run, in step order) recomputes the alarms it touches in place. Where the rule holds
// at the step an alarm fired at, that alarm is updated (kRefired); where it holds at the
// step an alarm resolved at, the alarm fires again (kReopened); where it no longer holds
// inside a resolved alarm's span, the resolution moves to that step (kResolutionMoved).
//
// Thread-safe: StepStored calls are serialized (each blocks on SQLite reads and one write);
// Exposition never touches the store. `store` is not owned.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/alarms/alarm_rules.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

// An alarm that storing a step changed, as stored, and how.
struct AlarmChange {
  enum class Kind {
    kFired,            // a new alarm
    kRefired,          // fired again at the step it fired at (that step stored again)
    kResolved,         // firing, now resolved
    kReopened,         // resolved, firing again: the rule holds at its resolution step now
    kResolutionMoved,  // resolved, now at an earlier step: the rule no longer holds there
  };
  Kind kind = Kind::kFired;
  storage::AlarmRecord alarm;

  // Whether the alarm started or stopped firing (kFired, kResolved, kReopened): what a
  // webhook is told.
  bool StateChanged() const {
    return kind == Kind::kFired || kind == Kind::kResolved || kind == Kind::kReopened;
  }
};

class AlarmMonitor {
 public:
  struct Options {
    std::vector<AlarmRule> rules;
    // The runs whose gauges /metrics exports: those that stored a step most recently since
    // the server started (--alarm-metrics-runs). Bounds the label sets (see Exposition).
    int max_exported_runs = 32;
  };

  AlarmMonitor(Options options, storage::MetricsStore* store);

  // Checks every rule on `step`, just stored whole, and returns the alarms it changed, as
  // stored (by revision). On a store error nothing of this step's alarms is stored.
  absl::StatusOr<std::vector<AlarmChange>> StepStored(const storage::StepResult& step);

  // Prometheus text for the exported runs of namespace `ns`: anisoscope_alarm_firing (one
  // series per firing rule and layer), anisoscope_run_latest_step and the summary gauges. Per
  // run of L layers at most rules x (L + 1) firing series (a rule over the L + 1 hidden
  // states; one over layers has one, "all") and L + 4 gauges; at most max_exported_runs runs.
  std::string Exposition(const std::string& ns) const;

  const std::vector<AlarmRule>& rules() const { return options_.rules; }

 private:
  using RunKey = std::pair<std::string, std::string>;  // (namespace, run)
  struct RunGauges {
    int64_t latest_step = 0;
    // gauge name -> layer (-1: over all) -> value at latest_step.
    std::map<std::string, std::map<int, double>> summaries;
    // probe -> its firing alarms.
    std::map<std::string, std::vector<storage::AlarmRecord>> firing;
  };

  // The alarms that change at `step`, recorded; `open` is what the store had open at it
  // (MetricsStore::AlarmsOpenAt).
  absl::StatusOr<std::vector<AlarmChange>> CheckRules(const storage::StepResult& step,
                                                      const std::vector<storage::AlarmRecord>& open)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGauges(const storage::StepResult& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  storage::MetricsStore* const store_;
  mutable absl::Mutex mu_;
  std::map<RunKey, RunGauges> runs_ ABSL_GUARDED_BY(mu_);
  std::list<RunKey> recent_ ABSL_GUARDED_BY(mu_);  // most recently stored first
};

}  // namespace anisoscope::server
