#include "server/grpc/job_service.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "server/grpc/call_credentials.h"
#include "server/grpc/unary_reactor.h"
#include "server/queries/queries.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server {
namespace {

// Streams one job's events. Events arrive from the runner (any thread, never blocking
// here), are queued under `mu_` (a bounded JobEventQueue) and written one at a time;
// StartWrite and Finish are called outside the lock. Deletes itself in OnDone, after
// unsubscribing.
class WatchJobReactor final : public grpc::ServerWriteReactor<pb::JobEvent>, public JobWatcher {
 public:
  // `caller` is the authorized caller, or why the call may not watch. The stream holds a
  // place in `slots` until it finishes.
  WatchJobReactor(JobRunner* runner, int64_t id, const absl::StatusOr<Principal>& caller,
                  WatchSlots* slots)
      : runner_(runner), id_(id), slots_(slots) {
    absl::Status status = caller.status();
    if (status.ok()) status = queries::JobInNamespace(*runner_, caller->ns, id).status();
    if (status.ok()) status = slots_->Acquire(caller->name, caller->ns);
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      slot_ = {caller->name, caller->ns};  // until the call finishes
    }
    if (status.ok()) status = runner_->Watch(id_, this);
    if (!status.ok()) {
      {
        absl::MutexLock lock(&mu_);
        ending_ = true;
        final_status_ = ToGrpcStatus(status);
      }
      Pump();
    }
  }

  void OnEvent(const pb::JobEvent& event) override {
    {
      absl::MutexLock lock(&mu_);
      if (ending_) return;
      queue_.Push(event);
      if (event.kind() == pb::JobEvent::KIND_JOB_FINISHED) ending_ = true;
    }
    Pump();
  }

  void OnClosed(const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (ending_) return;
      ending_ = true;
      final_status_ = ToGrpcStatus(status);
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queue_.Pop();
      if (!ok) {  // the stream is broken: stop writing, end the call
        queue_.Truncate(0);
        ending_ = true;
        final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "stream broken");
      }
    }
    Pump();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      // Drop what is queued (the write in flight, if any, completes with ok=false).
      queue_.Truncate(writing_ ? 1 : 0);
      ending_ = true;
      final_status_ = grpc::Status::CANCELLED;
    }
    Pump();
  }

  void OnDone() override {
    runner_->Unwatch(id_, this);
    delete this;
  }

 private:
  // Starts the next write, or finishes once everything queued is written.
  void Pump() {
    const pb::JobEvent* next = nullptr;
    std::optional<grpc::Status> finish;
    std::optional<std::pair<std::string, std::string>> release;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!queue_.empty()) {
        writing_ = true;
        next = &queue_.front();  // stable until popped in OnWriteDone
      } else if (ending_) {
        finished_ = true;
        finish = final_status_;
        release.swap(slot_);
      }
    }
    // Before Finish: once the caller sees the end, its place is free for its next call.
    if (release.has_value()) slots_->Release(release->first, release->second);
    if (next != nullptr) StartWrite(next);
    if (finish.has_value()) Finish(*finish);
  }

  JobRunner* const runner_;
  const int64_t id_;
  WatchSlots* const slots_;
  absl::Mutex mu_;
  // The (caller, namespace) place held in *slots_, until given back.
  std::optional<std::pair<std::string, std::string>> slot_ ABSL_GUARDED_BY(mu_);
  JobEventQueue queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;    // no more events will be queued
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish called
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const pb::SubmitJobRequest* request,
                                                    pb::Job* response) {
  absl::StatusOr<Principal> caller = AuthorizeCall(*access_, *context, Action::kWrite);
  if (!caller.ok()) return Respond(context, caller.status());
  absl::StatusOr<storage::JobRecord> job = submission_->Submit(*request, caller->ns, caller->name);
  if (job.ok()) ToProto(*job, response);
  return Respond(context, job.status());
}

grpc::ServerUnaryReactor* JobServiceImpl::AuditSource(grpc::CallbackServerContext* context,
                                                      const pb::AuditSourceRequest* request,
                                                      pb::AuditSourceResponse* response) {
  absl::StatusOr<Principal> caller = AuthorizeCall(*access_, *context, Action::kWrite);
  if (!caller.ok()) return Respond(context, caller.status());
  return Respond(context, audit_->Audit(*request, caller->ns, caller->name), response);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const pb::GetJobRequest* request,
                                                 pb::Job* response) {
  return RespondAuthorized(
      *access_, context, Action::kRead, response,
      [&](const Principal& caller) { return queries::GetJob(*runner_, caller.ns, *request); });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const pb::ListJobsRequest* request,
                                                   pb::ListJobsResponse* response) {
  return RespondAuthorized(
      *access_, context, Action::kRead, response,
      [&](const Principal& caller) { return queries::ListJobs(*runner_, caller.ns, *request); });
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const pb::CancelJobRequest* request,
                                                    pb::Job* response) {
  absl::StatusOr<Principal> caller = AuthorizeCall(*access_, *context, Action::kWrite);
  if (!caller.ok()) return Respond(context, caller.status());
  if (absl::Status status = queries::JobInNamespace(*runner_, caller->ns, request->id()).status();
      !status.ok()) {
    return Respond(context, status);
  }
  absl::StatusOr<storage::JobRecord> job = runner_->Cancel(request->id(), caller->name);
  if (job.ok()) ToProto(*job, response);
  return Respond(context, job.status());
}

grpc::ServerWriteReactor<pb::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const pb::WatchJobRequest* request) {
  return new WatchJobReactor(runner_, request->id(),
                             AuthorizeCall(*access_, *context, Action::kRead), &watch_slots_);
}

}  // namespace anisoscope::server
