#include "server/alarms/alarm_step_observer.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "server/wire/proto_convert.h"

namespace anisoscope::server {
namespace {

void LogChange(int64_t job_id, const AlarmChange& change) {
  const storage::AlarmRecord& alarm = change.alarm;
  switch (change.kind) {
    case AlarmChange::Kind::kFired:
      spdlog::warn("alarm {} ({}) fired at step {} of run '{}': {}", alarm.id, alarm.severity,
                   alarm.step, alarm.run, alarm.summary);
      return;
    case AlarmChange::Kind::kRefired:
      spdlog::info(
          "job {}: alarm {} fired again at step {} of run '{}' (the step was stored "
          "again; updated in place): {}",
          job_id, alarm.id, alarm.step, alarm.run, alarm.summary);
      return;
    case AlarmChange::Kind::kReopened:
      spdlog::warn(
          "alarm {} ({}) of run '{}' fires again: {} still holds at its resolution "
          "step, stored again",
          alarm.id, alarm.severity, alarm.run, alarm.rule);
      return;
    case AlarmChange::Kind::kResolved:
    case AlarmChange::Kind::kResolutionMoved:
      spdlog::info("alarm {} resolved at step {}: run '{}', {}", alarm.id,
                   alarm.resolved_step.value_or(alarm.step), alarm.run, alarm.rule);
      return;
  }
}

}  // namespace

void AlarmStepObserver::StepStored(const StoredStep& step, JobNotices& notices) {
  const storage::StepResult& result = *step.result;
  const absl::StatusOr<std::vector<AlarmChange>> changed = monitor_->StepStored(result);
  if (!changed.ok()) {
    spdlog::error("job {}: the alarm rules were not checked on step {} of run '{}': {}",
                  step.job_id, result.step, result.run, changed.status().ToString());
    return;
  }
  for (const AlarmChange& change : *changed) {
    LogChange(step.job_id, change);
    ::anisoscope::v1::Alarm message;
    ToProto(change.alarm, &message);
    notices.PublishAlarm(step.job_id, message);
    if (webhook_ != nullptr && change.StateChanged()) webhook_->Send(change.alarm);
  }
}

}  // namespace anisoscope::server
