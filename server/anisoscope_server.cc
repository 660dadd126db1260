#include "server/anisoscope_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/message_limits.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "common/tls_files.h"
#include "server/jobs/job_request.h"
#include "server/monitoring/query_timing.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server {
namespace {

// TLS from --tls-cert/--tls-key (and --tls-client-ca: verify the client certificates that
// are presented), else plain text.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const ServerOptions& options) {
  if (options.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(options.tls_cert, "--tls-cert"));
  ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(options.tls_key, "--tls-key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_client_ca.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(options.tls_client_ca, "--tls-client-ca"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<AnisoscopeServer>> AnisoscopeServer::Create(
    const ServerOptions& options, worker::ExtractorFactory extractor_factory) {
  absl::StatusOr<HostPort> listen_at = ParseHostPort(options.listen);
  if (!listen_at.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen: ", listen_at.status().message()));
  }
  if (options.allow_roots.empty()) {
    return absl::InvalidArgumentError("at least one allowed root is required");
  }
  ASSIGN_OR_RETURN(const AuthMode auth_mode, AuthModeFor(options));
  ASSIGN_OR_RETURN(const std::shared_ptr<grpc::ServerCredentials> credentials,
                   ServerCredentialsFor(options));
  std::unique_ptr<AnisoscopeServer> server(new AnisoscopeServer());

  absl::StatusOr<FileGate> files = FileGate::Beneath(options.allow_roots);
  if (!files.ok()) return files.status();
  server->files_ = std::make_unique<FileGate>(*std::move(files));

  storage::MetricsStore::Options store_options;
  store_options.path = options.db;
  store_options.check_integrity = true;
  absl::StatusOr<std::unique_ptr<storage::MetricsStore>> store =
      storage::MetricsStore::Open(store_options);
  if (!store.ok()) return store.status();
  server->store_ = std::move(store).value();
  server->access_ = std::make_unique<AccessControl>(auth_mode, server->store_.get());
  if (auth_mode == AuthMode::kTokens) {
    ASSIGN_OR_RETURN(const std::vector<storage::TokenRecord> tokens,
                     server->store_->ListTokens(/*active_only=*/true));
    if (tokens.empty()) {
      spdlog::warn(
          "--auth tokens and no token yet: create the first admin with "
          "'anisoscope-server tokens create --db {} --name NAME --role admin'",
          options.db);
    }
  }

  JobRunner::Options runner_options;
  runner_options.lease_timeout = absl::Seconds(options.lease_timeout_seconds);
  runner_options.max_attempts = options.max_attempts;
  runner_options.max_probe_tokens = options.limits.max_probe_tokens;
  runner_options.max_leases_per_worker = options.max_leases_per_worker;
  runner_options.dtype = options.extractor.dtype;
  server->metrics_ = std::make_unique<ServiceMetrics>();
  runner_options.metrics = server->metrics_.get();
  ASSIGN_OR_RETURN(std::vector<AlarmRule> rules, LoadAlarmRules(options.alarm_rules));
  spdlog::info("{} alarm rule(s) from {}", rules.size(),
               options.alarm_rules.empty() ? "the built-in default set" : options.alarm_rules);
  server->alarms_ = std::make_unique<AlarmMonitor>(
      AlarmMonitor::Options{std::move(rules), options.alarm_metrics_runs}, server->store_.get());
  if (!options.alarm_webhook.empty()) {
    AlarmWebhook::Options webhook_options;
    webhook_options.url = options.alarm_webhook;
    ASSIGN_OR_RETURN(server->webhook_, AlarmWebhook::Create(webhook_options));
  }
  runner_options.step_stored = [self = server.get()](int64_t job_id,
                                                     const storage::StepResult& step) {
    self->CheckAlarms(job_id, step);
  };
  runner_options.namespace_files = [store = server->store_.get(),
                                    files = server->files_.get()](const std::string& ns) {
    absl::StatusOr<FileGate> gate = GateForNamespace(*store, *files, ns);
    return gate.ok() ? *std::move(gate) : *FileGate::Beneath({});  // no root: nothing opens
  };
  absl::StatusOr<std::unique_ptr<JobRunner>> runner =
      JobRunner::Create(runner_options, server->store_.get());
  if (!runner.ok()) return runner.status();
  server->runner_ = std::move(runner).value();

  AccessControl* access = server->access_.get();
  server->job_service_ = std::make_unique<JobServiceImpl>(
      server->runner_.get(), server->files_.get(), server->store_.get(), access, options.limits);
  server->query_service_ =
      std::make_unique<QueryServiceImpl>(server->store_.get(), access, options.limits);
  server->admin_service_ = std::make_unique<AdminServiceImpl>(server->store_.get(), access);
  const std::string embedded_key = RandomId128();  // this process's embedded workers' key
  server->worker_service_ =
      std::make_unique<WorkerServiceImpl>(server->runner_.get(), access, embedded_key);

  grpc::EnableDefaultHealthCheckService(true);
  // Server reflection (grpcurl, grpc_cli): the services' schema, readable without a token.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> timing;
  timing.push_back(QueryTimingInterceptor(server->metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(timing));
  builder.RegisterService(server->job_service_.get());
  builder.RegisterService(server->query_service_.get());
  builder.RegisterService(server->worker_service_.get());
  builder.RegisterService(server->admin_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    server->Shutdown(absl::Seconds(1));
    return absl::UnavailableError(absl::StrCat("cannot listen on '", options.listen, "'"));
  }
  if (grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
  }
  server->port_ = port;
  server->address_ = FormatHostPort(listen_at->host, port);
  grpc::ChannelArguments channel_arguments;
  channel_arguments.SetMaxReceiveMessageSize(kMaxMessageBytes);
  channel_arguments.SetMaxSendMessageSize(kMaxMessageBytes);
  absl::StatusOr<std::unique_ptr<EmbeddedWorkers>> embedded = EmbeddedWorkers::Start(
      options.workers, server->server_->InProcessChannel(channel_arguments),
      std::move(extractor_factory), server->files_.get(), options.extractor.device, embedded_key);
  if (!embedded.ok()) {
    server->Shutdown(absl::Seconds(1));
    return embedded.status();
  }
  server->embedded_ = std::move(embedded).value();
  server->follower_ = std::make_unique<CheckpointFollower>(
      server->runner_.get(), server->store_.get(), server->files_.get(),
      absl::Seconds(options.follow_interval_seconds));
  if (!options.http_listen.empty()) {
    HttpServer::Options http_options;
    http_options.listen = options.http_listen;
    http_options.web_dir = options.web_dir.empty() ? DefaultWebDir() : options.web_dir;
    http_options.threads = options.http_threads;
    http_options.max_queued = options.http_max_queued;
    http_options.read_timeout_seconds = options.http_read_timeout_seconds;
    http_options.write_timeout_seconds = options.http_write_timeout_seconds;
    http_options.cors_origins = options.cors_origins;
    http_options.limits = options.limits;
    http_options.tls_cert = options.tls_cert;
    http_options.tls_key = options.tls_key;
    http_options.namespace_metrics = [alarms = server->alarms_.get(),
                                      webhook = server->webhook_.get()](const std::string& ns) {
      return alarms->Exposition(ns) + (webhook != nullptr ? webhook->Exposition() : "");
    };
    absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Create(
        http_options, server->store_.get(), server->runner_.get(), access, server->metrics_.get());
    if (!http.ok()) {
      server->Shutdown(absl::Seconds(1));
      return http.status();
    }
    server->http_ = std::move(http).value();
  }
  spdlog::info("serving on {} ({}, auth {}) with {} embedded worker(s); database {}",
               server->address_, options.tls_cert.empty() ? "plain text" : "TLS",
               auth_mode == AuthMode::kTokens ? "tokens" : "none", options.workers, options.db);
  return server;
}

AnisoscopeServer::~AnisoscopeServer() { Shutdown(absl::Seconds(2)); }

void AnisoscopeServer::CheckAlarms(int64_t job_id, const storage::StepResult& step) {
  const absl::StatusOr<std::vector<storage::AlarmRecord>> changed = alarms_->StepStored(step);
  if (!changed.ok()) {
    spdlog::error("job {}: the alarm rules were not checked on step {} of run '{}': {}", job_id,
                  step.step, step.run, changed.status().ToString());
    return;
  }
  for (const storage::AlarmRecord& alarm : *changed) {
    if (alarm.resolved_step.has_value()) {
      spdlog::info("alarm {} resolved at step {}: run '{}', {}", alarm.id, *alarm.resolved_step,
                   alarm.run, alarm.rule);
    } else {
      spdlog::warn("alarm {} ({}) fired at step {} of run '{}': {}", alarm.id, alarm.severity,
                   alarm.step, alarm.run, alarm.summary);
    }
    pb::Alarm message;
    ToProto(alarm, &message);
    runner_->PublishAlarm(job_id, message);
    if (webhook_ != nullptr) webhook_->Send(alarm);
  }
}

void AnisoscopeServer::Drain() {
  if (server_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
      health->SetServingStatus(false);
    }
  }
  if (follower_ != nullptr) follower_->Stop();
  if (runner_ != nullptr) runner_->StopLeasing();
  if (embedded_ != nullptr) embedded_->Stop();
  if (runner_ != nullptr) runner_->Drain();
}

void AnisoscopeServer::Shutdown(absl::Duration deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  Drain();
  if (http_ != nullptr) http_->Stop();
  if (server_ == nullptr) return;  // Create failed before serving
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
  spdlog::info("server stopped");
}

}  // namespace anisoscope::server
