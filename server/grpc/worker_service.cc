#include "server/grpc/worker_service.h"

#include <atomic>
#include <utility>

#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "server/grpc/call_credentials.h"
#include "server/grpc/unary_reactor.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

// A long-polling LeaseWork: finished by the runner's answer or withdrawn when the worker
// goes away. Deletes itself in OnDone.
class LeaseWorkReactor final : public grpc::ServerUnaryReactor {
 public:
  LeaseWorkReactor(JobRunner* runner, pb::LeaseWorkResponse* response)
      : runner_(runner), response_(response), ticket_(runner->NewLeaseTicket()) {}

  // Touches nothing of `this` after Lease: the answer may finish the call, and OnDone
  // delete the reactor, before Lease returns.
  void Start(const pb::LeaseWorkRequest& request, const JobRunner::LeaseCaller& caller) {
    identity_ = caller.identity;
    runner_->Lease(ticket_, request, caller, [this](absl::StatusOr<pb::LeaseWorkResponse> answer) {
      if (answer.ok()) *response_ = std::move(answer).value();
      Finish(ToGrpcStatus(answer.status()));
    });
  }

  // A withdrawn wait is never answered, so the call is finished here.
  void OnCancel() override {
    cancelled_ = true;
    if (runner_->WithdrawLease(ticket_)) Finish(grpc::Status::CANCELLED);
  }

  // A unit granted to a call that had already gone (the worker stopped or disconnected
  // mid-poll) is given back rather than left to expire.
  void OnDone() override {
    if (cancelled_ && response_->has_unit()) {
      pb::FailWorkRequest release;
      release.set_lease_id(response_->unit().lease_id());
      release.set_kind(pb::FailWorkRequest::KIND_RELEASED);
      runner_->Fail(release, identity_).IgnoreError();  // already ended otherwise: nothing to do
    }
    delete this;
  }

 private:
  JobRunner* const runner_;
  pb::LeaseWorkResponse* const response_;
  std::atomic<bool> cancelled_{false};
  const int64_t ticket_;
  std::string identity_;  // the caller's, set before the lease is asked for
};

}  // namespace

grpc::ServerUnaryReactor* WorkerServiceImpl::LeaseWork(grpc::CallbackServerContext* context,
                                                       const pb::LeaseWorkRequest* request,
                                                       pb::LeaseWorkResponse* response) {
  const Credentials credentials = CallCredentials(*context, embedded_key_);
  absl::StatusOr<Principal> caller = access_->Authorize(credentials, Action::kWork);
  if (!caller.ok()) return Respond(context, caller.status());
  auto* reactor = new LeaseWorkReactor(runner_, response);
  reactor->Start(*request, {caller->name, caller->work_scope, credentials.embedded});
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const pb::HeartbeatRequest* request,
                                                       pb::HeartbeatResponse* response) {
  return RespondAuthorized(
      *access_, context, Action::kWork, response,
      [&](const Principal& caller) { return runner_->Heartbeat(*request, caller.name); },
      embedded_key_);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::CompleteWork(grpc::CallbackServerContext* context,
                                                          const pb::CompleteWorkRequest* request,
                                                          pb::CompleteWorkResponse* response) {
  return RespondAuthorized(
      *access_, context, Action::kWork, response,
      [&](const Principal& caller) { return runner_->Complete(*request, caller.name); },
      embedded_key_);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::FailWork(grpc::CallbackServerContext* context,
                                                      const pb::FailWorkRequest* request,
                                                      pb::FailWorkResponse* response) {
  return RespondAuthorized(
      *access_, context, Action::kWork, response,
      [&](const Principal& caller) -> absl::StatusOr<pb::FailWorkResponse> {
        RETURN_IF_ERROR(runner_->Fail(*request, caller.name));
        return pb::FailWorkResponse();
      },
      embedded_key_);
}

}  // namespace anisoscope::server
