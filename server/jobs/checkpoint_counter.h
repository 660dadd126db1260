// CheckpointCounter: the service's count of stored checkpoints (family, device, seconds in
// /metrics) and of what fetching the remote ones cost, kept as a StepObserver of the job
// runner. Thread-safe.
#pragma once

#include "server/jobs/step_observer.h"
#include "server/monitoring/service_metrics.h"

namespace anisoscope::server {

class CheckpointCounter final : public StepObserver {
 public:
  // `metrics` is not owned and must outlive the counter.
  explicit CheckpointCounter(ServiceMetrics* metrics) : metrics_(metrics) {}

  void StepStored(const StoredStep& step, JobNotices& /*notices*/) override {
    metrics_->RecordCheckpoint(step.model_family, step.device, step.seconds);
    if (step.fetch != nullptr) {
      metrics_->RecordFetch({step.fetch->cache_hit(), step.fetch->bytes_fetched(),
                             step.fetch->retries(), step.fetch->seconds()});
    }
  }

 private:
  ServiceMetrics* const metrics_;
};

}  // namespace anisoscope::server
