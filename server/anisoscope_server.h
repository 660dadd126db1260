// AnisoscopeServer: the store, path policy, job runner, gRPC services and (with
// http_listen) the HTTP API of one process.
//
// Create opens the database, resumes unfinished jobs and starts serving gRPC, then HTTP. Shutdown
// drains (new jobs get UNAVAILABLE, running extractions stop and stay pending for the next start,
// writes in progress finish), then stops gRPC with a deadline. Drain and Shutdown are called from
// one thread (main); the services themselves are thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_gate.h"
#include "server/alarms/alarm_monitor.h"
#include "server/alarms/alarm_step_observer.h"
#include "server/alarms/alarm_webhook.h"
#include "server/auth/access_control.h"
#include "server/grpc/admin_service.h"
#include "server/grpc/job_service.h"
#include "server/grpc/query_service.h"
#include "server/grpc/worker_service.h"
#include "server/http/http_server.h"
#include "server/jobs/checkpoint_counter.h"
#include "server/jobs/checkpoint_follower.h"
#include "server/jobs/embedded_workers.h"
#include "server/jobs/job_runner.h"
#include "server/jobs/job_submission.h"
#include "server/jobs/source_audit.h"
#include "server/jobs/worker_pool.h"
#include "server/jobs/worker_processes.h"
#include "server/jobs/worker_socket.h"
#include "server/monitoring/service_metrics.h"
#include "server/server_options.h"
#include "storage/metrics_store.h"
#include "worker/unit_runner.h"

namespace anisoscope::server {

class AnisoscopeServer {
 public:
  // The embedded workers run options.worker_binary (main: anisoscope-worker beside it);
  // `extractor_factory` checks at start that their engine can run here, or, without a
  // worker binary, makes each embedded worker thread's extractor (tests pass a fake). INVALID_ARGUMENT for a bad allowed root or listen address, UNAVAILABLE when the
  // port cannot be bound ("address already in use: ..." when another socket holds --listen
  // or --http-listen, found before the database is opened), the store's or factory's error
  // otherwise.
  static absl::StatusOr<std::unique_ptr<AnisoscopeServer>> Create(
      const ServerOptions& options, worker::ExtractorFactory extractor_factory);
  ~AnisoscopeServer();  // Shutdown with a short deadline.

  // The bound address, e.g. "127.0.0.1:43127" (the real port when --listen had port 0).
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // The HTTP API's bound address; empty without --http-listen.
  std::string http_address() const { return http_ == nullptr ? "" : http_->address(); }

  // Starts draining and marks the health service NOT_SERVING: no more leases, embedded
  // workers give theirs back; returns once they have stopped. gRPC keeps serving queries
  // (and remote workers' heartbeats and uploads). Idempotent.
  void Drain();
  // Drain, stop HTTP, then stop gRPC, cancelling calls still open after `deadline`.
  // Blocks; idempotent.
  void Shutdown(absl::Duration deadline);

  JobRunner& runner() { return *runner_; }
  storage::MetricsStore& store() { return *store_; }

 private:
  AnisoscopeServer() = default;

  // The embedded workers: processes of options.worker_binary, or threads with
  // `extractor_factory`'s extractors when it is empty (tests, benchmarks).
  static absl::Status StartWorkers(const ServerOptions& options,
                                   worker::ExtractorFactory extractor_factory,
                                   const std::string& key,
                                   const grpc::ChannelArguments& channel_arguments,
                                   AnisoscopeServer* server);

  std::unique_ptr<storage::MetricsStore> store_;
  std::unique_ptr<ServiceMetrics> metrics_;
  // The alarm rules and their webhook (null without --alarm-webhook), and the runner's
  // observers of stored steps: called by the runner, so they outlive it.
  std::unique_ptr<AlarmMonitor> alarms_;
  std::unique_ptr<AlarmWebhook> webhook_;
  std::unique_ptr<AlarmStepObserver> alarm_observer_;
  std::unique_ptr<CheckpointCounter> checkpoint_counter_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<FileGate> files_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<SourceLister> sources_;  // --allow-source and the endpoints' clients
  std::unique_ptr<JobSubmission> submission_;
  std::unique_ptr<SourceAudit> audit_;  // JobService.AuditSource's core
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<QueryServiceImpl> query_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WorkerSocket> worker_socket_;  // null unless worker processes run
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<CheckpointFollower> follower_;
  std::unique_ptr<HttpServer> http_;  // null without --http-listen
  std::string address_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace anisoscope::server
