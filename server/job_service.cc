#include "server/job_service.h"

#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "server/call_credentials.h"
#include "server/job_request.h"
#include "server/proto_convert.h"
#include "server/queries.h"
#include "server/unary_reactor.h"

namespace anisoscope::server {
namespace {

// Streams one job's events. Events arrive from the runner (any thread, never blocking
// here), are queued under `mu_` and written one at a time; StartWrite and Finish are called
// outside the lock. Deletes itself in OnDone, after unsubscribing.
class WatchJobReactor final : public grpc::ServerWriteReactor<pb::JobEvent>, public JobWatcher {
 public:
  // `caller` is the authorized caller, or why the call may not watch. `open` counts the
  // streams open now, at most `max_open` of them.
  WatchJobReactor(JobRunner* runner, int64_t id, const absl::StatusOr<Principal>& caller,
                  std::atomic<int>* open, int max_open)
      : runner_(runner), id_(id), open_(open) {
    absl::Status status = caller.status();
    if (status.ok()) {
      {
        absl::MutexLock lock(&mu_);
        counted_ = true;  // until the call finishes, refused or not
      }
      if (open_->fetch_add(1) >= max_open) {
        status = absl::ResourceExhaustedError(
            absl::StrCat("this server has ", max_open,
                         " WatchJob streams open, its limit (--max-watch-streams); try again "
                         "later or poll GetJob"));
      }
    }
    if (status.ok()) status = queries::JobInNamespace(*runner_, caller->ns, id).status();
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
      queue_.push_back(event);
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
      queue_.pop_front();
      if (!ok) {  // the stream is broken: stop writing, end the call
        queue_.clear();
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
      while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
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
    bool uncount = false;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!queue_.empty()) {
        writing_ = true;
        next = &queue_.front();  // stable until popped in OnWriteDone
      } else if (ending_) {
        finished_ = true;
        finish = final_status_;
        uncount = counted_;
        counted_ = false;
      }
    }
    // Before Finish: once the caller sees the end, its place is free for its next call.
    if (uncount) open_->fetch_sub(1);
    if (next != nullptr) StartWrite(next);
    if (finish.has_value()) Finish(*finish);
  }

  JobRunner* const runner_;
  const int64_t id_;
  std::atomic<int>* const open_;
  absl::Mutex mu_;
  bool counted_ ABSL_GUARDED_BY(mu_) = false;  // counted in *open_
  std::deque<pb::JobEvent> queue_ ABSL_GUARDED_BY(mu_);
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
  absl::StatusOr<std::unique_ptr<PathPolicy>> policy =
      PolicyForNamespace(*store_, *policy_, caller->ns);
  if (!policy.ok()) return Respond(context, policy.status());
  absl::StatusOr<storage::JobSpec> spec = JobSpecFromRequest(*request, **policy);
  if (!spec.ok()) return Respond(context, spec.status());
  spec->ns = caller->ns;
  absl::StatusOr<storage::JobRecord> job = runner_->Submit(*spec, caller->name);
  if (job.ok()) ToProto(*job, response);
  return Respond(context, job.status());
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
                             AuthorizeCall(*access_, *context, Action::kRead), &open_watches_,
                             limits_.max_watch_streams);
}

}  // namespace anisoscope::server
