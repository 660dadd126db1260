// The seam between a stored step and what watches steps being stored (the alarm rules in
// server/alarms/, the service's counters): the runner calls each StepObserver it was given,
// and an observer answers the job's watchers through JobNotices, never by reaching back into
// the server. Declared here, implemented above (server/alarms/) or beside (CheckpointCounter).
#pragma once

#include <cstdint>
#include <string>

#include "anisoscope/v1/anisoscope.pb.h"
#include "storage/types.h"

namespace anisoscope::server {

// One step stored whole (not skipped) from a worker's upload.
struct StoredStep {
  int64_t job_id = 0;
  const storage::StepResult* result = nullptr;  // as stored; valid during the call
  std::string model_family;                     // the upload's
  std::string device;                           // the worker's
  double seconds = 0;                           // the worker's time on the step
  // A remote step's fetch, as its worker reported it; null for a folder's. Valid during the call.
  const ::anisoscope::v1::FetchStats* fetch = nullptr;
};

// What an observer may tell a job's watchers. Thread-safe; never blocks on I/O.
class JobNotices {
 public:
  // A KIND_ALARM event to job `job_id`'s watchers; nothing when the job has ended or has none.
  virtual void PublishAlarm(int64_t job_id, const ::anisoscope::v1::Alarm& alarm) = 0;

 protected:
  ~JobNotices() = default;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Called once per step stored whole, outside the runner's lock, before the step's
  // STEP_FINISHED event and its worker's answer; may block on the store. Called from the
  // completing workers' threads, concurrently: implementations are thread-safe.
  virtual void StepStored(const StoredStep& step, JobNotices& notices) = 0;
};

}  // namespace anisoscope::server
