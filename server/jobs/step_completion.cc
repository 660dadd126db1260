#include "server/jobs/step_completion.h"

#include "common/status_macros.h"
#include "server/jobs/step_upload.h"
#include "server/jobs/unit_probe.h"
#include "server/sources/source_description.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

absl::StatusOr<Verdict> AskStore(storage::JobStore& store, const VerdictQuestion& question) {
  if (!question.probe_id.empty()) {
    ASSIGN_OR_RETURN(const bool stored,
                     store.HasStep(question.ns, question.run, question.probe_id, question.step));
    if (stored) return Verdict{Verdict::Kind::kAlreadyStored};
  }
  if (!question.fingerprint.empty()) {
    ASSIGN_OR_RETURN(const int64_t earlier,
                     store.EarlierStepWithFingerprint(question.ns, question.run,
                                                      question.fingerprint, question.step));
    if (earlier >= 0) return Verdict{Verdict::Kind::kDuplicate, earlier};
  }
  return Verdict{};
}

absl::StatusOr<storage::FinishedLease> StoreCompletion(const pb::CompleteWorkRequest& upload,
                                                       const Completion& completion,
                                                       storage::JobStore& store,
                                                       const std::vector<StepObserver*>& observers,
                                                       JobNotices& notices) {
  const storage::JobCheckpoint& leased = completion.checkpoint;
  ASSIGN_OR_RETURN(storage::StepResult result,
                   StepResultFromUpload(upload, completion.run, leased.step, leased.path));
  // `leased.probe_id` is the id the lease's heartbeat reported, if any.
  RETURN_IF_ERROR(CheckUploadMatchesUnit(upload, *completion.probe, leased.probe_id));
  result.ns = completion.ns;
  if (!leased.remote.empty()) {
    // Where the step was read from, stored with it (Run.origins).
    pb::RemoteCheckpoint remote;
    if (remote.ParseFromString(leased.remote)) {
      result.origin_source = StepOriginSource(remote);
      result.origin_revision = remote.revision();
      result.origin_commit = remote.commit();
    }
  }
  // The label readers see is the server's, from what the job was submitted with.
  result.probe.description =
      ProbeLabel(*completion.probe, result.probe.num_samples, result.probe.num_tokens);
  storage::JobCheckpoint finished = leased;
  finished.state = storage::StepState::kDone;
  finished.error.clear();
  finished.probe_id = result.probe.id;
  finished.size_bytes = upload.checkpoint_bytes();
  finished.seconds = upload.seconds();
  finished.lease_id.clear();
  finished.lease_local = false;
  finished.lease_holder.clear();
  ASSIGN_OR_RETURN(storage::FinishedLease stored,
                   store.FinishLease(completion.job_id, completion.lease_id, finished, result,
                                     completion.mode));
  if (stored.checkpoint.state == storage::StepState::kDone) {
    const StoredStep step{completion.job_id, &result, upload.metrics().model_family(),
                          completion.device, upload.seconds(),
                          upload.has_fetch() ? &upload.fetch() : nullptr};
    for (StepObserver* observer : observers) observer->StepStored(step, notices);
  }
  return stored;
}

}  // namespace anisoscope::server
