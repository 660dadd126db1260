#include "server/anisoscope_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "common/listen_check.h"
#include "common/message_limits.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "common/tls_files.h"
#include "server/monitoring/query_timing.h"
#include "worker/extractor_flags.h"

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

// The server's remote sources: --allow-source and the endpoints' clients. Without
// --allow-source nothing remote may be read, so no endpoint or credential is resolved (a
// malformed ~/.aws/credentials does not stop a server that reads folders).
absl::StatusOr<std::unique_ptr<SourceLister>> MakeSourceLister(const ServerOptions& options) {
  if (options.allow_sources.empty()) return SourceLister::None();
  SourceLister::Options lister;
  ASSIGN_OR_RETURN(lister.allowed, SourceAllowList::Parse(options.allow_sources));
  // The endpoint flags (worker/source_flags.h: the same its embedded workers get); the
  // environment (HF_ENDPOINT, AWS_*) resolves what they leave unset.
  ASSIGN_OR_RETURN(lister.endpoints,
                   sources::ResolveSourceEndpoints(options.sources.endpoints));
  // The listings stall no longer than a worker's downloads may (--fetch-stall-timeout).
  transfer::TransferOptions transfer;
  transfer.stall_timeout = absl::Seconds(options.sources.fetch_stall_timeout_seconds);
  ASSIGN_OR_RETURN(lister.clients, sources::MakeSourceClients(lister.endpoints, transfer));
  spdlog::info("remote sources allowed: {} (Hub {}, S3 {})",
               absl::StrJoin(lister.allowed.entries(), ", "), lister.endpoints.hub_endpoint,
               lister.endpoints.s3_endpoint);
  return SourceLister::Create(std::move(lister));
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
  // A busy address is refused before the database is opened: a second server on the same
  // port changes nothing.
  RETURN_IF_ERROR(CheckAddressFree(*listen_at, "--listen"));
  if (!options.http_listen.empty()) {
    if (absl::StatusOr<HostPort> http_at = ParseHostPort(options.http_listen); http_at.ok()) {
      RETURN_IF_ERROR(CheckAddressFree(*http_at, "--http-listen"));
    }
  }
  ASSIGN_OR_RETURN(const AuthMode auth_mode, AuthModeFor(options));
  ASSIGN_OR_RETURN(const std::shared_ptr<grpc::ServerCredentials> credentials,
                   ServerCredentialsFor(options));
  // Checked before the database is opened (or made): a bad flag leaves no file behind.
  ASSIGN_OR_RETURN(std::vector<AlarmRule> rules, LoadAlarmRules(options.alarm_rules));
  std::unique_ptr<AnisoscopeServer> server(new AnisoscopeServer());

  absl::StatusOr<FileGate> files = FileGate::Beneath(options.allow_roots);
  if (!files.ok()) return files.status();
  server->files_ = std::make_unique<FileGate>(*std::move(files));

  // A new database is said out loud: a --db with a typo otherwise looks like lost runs.
  std::error_code exists_error;
  const std::filesystem::path db_path(options.db);
  const bool new_db = !std::filesystem::exists(db_path, exists_error);
  const bool new_folder = new_db && !db_path.parent_path().empty() &&
                          !std::filesystem::exists(db_path.parent_path(), exists_error);
  storage::MetricsStore::Options store_options;
  store_options.path = options.db;
  store_options.check_integrity = true;
  absl::StatusOr<std::unique_ptr<storage::MetricsStore>> store =
      storage::MetricsStore::Open(store_options);
  if (!store.ok()) return store.status();
  spdlog::info("{} alarm rule(s) from {}", rules.size(),
               options.alarm_rules.empty() ? "the built-in default set" : options.alarm_rules);
  if (new_folder) {
    spdlog::warn(
        "new database {}: its folder {} did not exist and was created (meant an existing "
        "database? check --db)",
        options.db, db_path.parent_path().string());
  } else if (new_db) {
    spdlog::info("new database {}", options.db);
  }
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

  server->metrics_ = std::make_unique<ServiceMetrics>();
  server->alarms_ = std::make_unique<AlarmMonitor>(
      AlarmMonitor::Options{std::move(rules), options.alarm_metrics_runs}, server->store_.get());
  if (!options.alarm_webhook.empty()) {
    AlarmWebhook::Options webhook_options;
    webhook_options.url = options.alarm_webhook;
    ASSIGN_OR_RETURN(server->webhook_, AlarmWebhook::Create(webhook_options));
  }
  server->alarm_observer_ =
      std::make_unique<AlarmStepObserver>(server->alarms_.get(), server->webhook_.get());
  server->checkpoint_counter_ = std::make_unique<CheckpointCounter>(server->metrics_.get());

  JobRunner::Options runner_options;
  runner_options.lease_timeout = absl::Seconds(options.lease_timeout_seconds);
  runner_options.max_attempts = options.max_attempts;
  runner_options.max_leases_per_worker = options.max_leases_per_worker;
  runner_options.dtype = options.extractor.dtype;
  runner_options.observers = {server->alarm_observer_.get(), server->checkpoint_counter_.get()};
  // The sources first: a resumed job whose source is refused now is failed, not resumed.
  ASSIGN_OR_RETURN(server->sources_, MakeSourceLister(options));
  ASSIGN_OR_RETURN(std::vector<JobRunner::ResumedJob> resumed,
                   LoadUnfinishedJobs(*server->store_, *server->files_,
                                      options.limits.max_probe_tokens, server->sources_.get()));
  ASSIGN_OR_RETURN(server->runner_, JobRunner::Create(runner_options, server->store_.get(),
                                                      std::move(resumed)));
  server->submission_ =
      std::make_unique<JobSubmission>(server->runner_.get(), server->store_.get(),
                                      server->files_.get(), options.limits, server->sources_.get());
  server->audit_ = std::make_unique<SourceAudit>(server->store_.get(), server->files_.get(),
                                                 server->sources_.get());

  AccessControl* access = server->access_.get();
  server->job_service_ = std::make_unique<JobServiceImpl>(
      server->runner_.get(), server->submission_.get(), server->audit_.get(), access,
      options.limits);
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
  if (options.workers > 0 && !options.worker_binary.empty()) {
    ASSIGN_OR_RETURN(server->worker_socket_, WorkerSocket::Create());
    builder.AddListeningPort(server->worker_socket_->address(), grpc::InsecureServerCredentials());
  }
  // One server per address: without SO_REUSEPORT a second server's bind fails instead of
  // splitting the clients between two databases.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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
    RETURN_IF_ERROR(CheckAddressFree(*listen_at, "--listen"));  // taken since the check above
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
  absl::Status workers_started = StartWorkers(options, std::move(extractor_factory), embedded_key,
                                              channel_arguments, server.get());
  if (!workers_started.ok()) {
    server->Shutdown(absl::Seconds(1));
    return workers_started;
  }
  server->follower_ = std::make_unique<CheckpointFollower>(
      server->runner_.get(), server->store_.get(), server->files_.get(),
      absl::Seconds(options.follow_interval_seconds), server->sources_.get(),
      options.remote_follow_interval_seconds.has_value()
          ? absl::Seconds(*options.remote_follow_interval_seconds)
          : CheckpointFollower::kRemoteFollowInterval);
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
    http_options.audit = server->audit_.get();
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

absl::Status AnisoscopeServer::StartWorkers(const ServerOptions& options,
                                            worker::ExtractorFactory extractor_factory,
                                            const std::string& key,
                                            const grpc::ChannelArguments& channel_arguments,
                                            AnisoscopeServer* server) {
  if (options.worker_binary.empty()) {
    ASSIGN_OR_RETURN(server->workers_,
                     EmbeddedWorkers::Start(options.workers,
                                            server->server_->InProcessChannel(channel_arguments),
                                            std::move(extractor_factory), server->files_.get(),
                                            options.extractor.device, key));
    return absl::OkStatus();
  }
  if (options.workers > 0) {
    // Fail at start, not in each worker, when the engine cannot run here (CUDA asked for
    // and absent); nothing is read.
    absl::StatusOr<std::unique_ptr<analysis::Extractor>> check = extractor_factory("float32");
    if (!check.ok()) return check.status();
  }
  WorkerProcesses::Options worker_options;
  worker_options.count = options.workers;
  worker_options.binary = options.worker_binary;
  worker_options.server = server->worker_socket_ != nullptr ? server->worker_socket_->address() : "";
  worker_options.allow_roots = options.allow_roots;
  worker_options.engine_args = worker::WorkerEngineArgs(options.extractor, options.bounds);
  worker_options.source_args = worker::WorkerSourceArgs(options.sources);
  worker_options.key = key;
  worker_options.log_level = options.log_level;
  ASSIGN_OR_RETURN(server->workers_, WorkerProcesses::Start(worker_options, server->runner_.get()));
  return absl::OkStatus();
}

AnisoscopeServer::~AnisoscopeServer() { Shutdown(absl::Seconds(2)); }

void AnisoscopeServer::Drain() {
  if (server_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
      health->SetServingStatus(false);
    }
  }
  if (follower_ != nullptr) follower_->Stop();
  if (runner_ != nullptr) runner_->StopLeasing();
  if (workers_ != nullptr) workers_->Stop();
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
