#include "server/worker_service.h"

#include <atomic>
#include <utility>

#include "common/grpc_status.h"
#include "server/embedded_workers.h"
#include "server/unary_reactor.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

// A long-polling LeaseWork: finished by the runner's answer or withdrawn when the worker
// goes away. Deletes itself in OnDone.
class LeaseWorkReactor final : public grpc::ServerUnaryReactor {
 public:
  LeaseWorkReactor(JobRunner* runner, pb::LeaseWorkResponse* response)
      : runner_(runner),
        response_(response),
        ticket_(runner->NewLeaseTicket()) {}

  // Touches nothing of `this` after Lease: the answer may finish the call, and OnDone
  // delete the reactor, before Lease returns.
  void Start(const pb::LeaseWorkRequest& request, bool local) {
    runner_->Lease(ticket_, request, local, [this](absl::StatusOr<pb::LeaseWorkResponse> answer) {
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
      runner_->Fail(release).IgnoreError();  // already ended otherwise: nothing to do
    }
    delete this;
  }

 private:
  JobRunner* const runner_;
  pb::LeaseWorkResponse* const response_;
  std::atomic<bool> cancelled_{false};
  const int64_t ticket_;
};

}  // namespace

bool WorkerServiceImpl::IsEmbeddedWorker(const grpc::CallbackServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kEmbeddedWorkerKey);
  return it != metadata.end() && !embedded_key_.empty() &&
         std::string(it->second.data(), it->second.size()) == embedded_key_;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::LeaseWork(grpc::CallbackServerContext* context,
                                                       const pb::LeaseWorkRequest* request,
                                                       pb::LeaseWorkResponse* response) {
  auto* reactor = new LeaseWorkReactor(runner_, response);
  reactor->Start(*request, IsEmbeddedWorker(*context));
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const pb::HeartbeatRequest* request,
                                                       pb::HeartbeatResponse* response) {
  return Respond(context, runner_->Heartbeat(*request), response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::CompleteWork(grpc::CallbackServerContext* context,
                                                          const pb::CompleteWorkRequest* request,
                                                          pb::CompleteWorkResponse* response) {
  return Respond(context, runner_->Complete(*request), response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::FailWork(grpc::CallbackServerContext* context,
                                                      const pb::FailWorkRequest* request,
                                                      pb::FailWorkResponse* /*response*/) {
  return Respond(context, runner_->Fail(*request));
}

}  // namespace anisoscope::server
