// AlarmStepObserver: the alarm rules as a StepObserver of the job runner. Each step stored
// whole is checked (AlarmMonitor); each alarm it changes is logged and told to the job's
// watchers (a KIND_ALARM event, also for an alarm a re-stored step fired again). With
// --alarm-webhook, an alarm that starts or stops firing is sent (AlarmChange::StateChanged):
// a --force re-run that finds the same alarms sends nothing again. Thread-safe.
#pragma once

#include "server/alarms/alarm_monitor.h"
#include "server/alarms/alarm_webhook.h"
#include "server/jobs/step_observer.h"

namespace anisoscope::server {

class AlarmStepObserver final : public StepObserver {
 public:
  // Neither owned; `webhook` may be null (none). Both must outlive the observer.
  AlarmStepObserver(AlarmMonitor* monitor, AlarmWebhook* webhook)
      : monitor_(monitor), webhook_(webhook) {}

  // A store error is logged: the step stays stored, its alarms unchecked.
  void StepStored(const StoredStep& step, JobNotices& notices) override;

 private:
  AlarmMonitor* const monitor_;
  AlarmWebhook* const webhook_;
};

}  // namespace anisoscope::server
