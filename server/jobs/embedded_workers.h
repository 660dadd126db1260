// EmbeddedWorkers: embedded workers as threads of the server's process, each a WorkerLoop
// leasing over an in-process channel to this server's WorkerService: the same lease path
// as remote anisoscope-worker processes. For tests and benchmarks with a fake engine: the
// server itself runs worker processes (worker_processes.h), so that no checkpoint is read
// in its address space. Stop interrupts their units and gives the leases back. Start and
// Stop are called from one thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/embedded_worker_key.h"
#include "common/file_gate.h"
#include "server/jobs/worker_pool.h"
#include "worker/unit_runner.h"
#include "worker/worker_loop.h"

namespace anisoscope::server {

class EmbeddedWorkers final : public WorkerPool {
 public:
  // Starts `count` workers named embedded-1 … embedded-N reporting `device`. They open a
  // unit's files beneath its namespace's roots within `server_files` (not owned; outlives
  // the workers). The factory's error when it cannot make an
  // extractor (e.g. CUDA asked for and absent).
  // Every call carries kEmbeddedWorkerKey: `key`, so the server knows its own workers.
  static absl::StatusOr<std::unique_ptr<EmbeddedWorkers>> Start(
      int count, const std::shared_ptr<grpc::Channel>& channel, worker::ExtractorFactory factory,
      const FileGate* server_files, const std::string& device, const std::string& key);
  ~EmbeddedWorkers() override;  // Stop.

  // Interrupts the units in progress (their leases go back to pending) and joins. Blocks;
  // idempotent.
  void Stop() override;

 private:
  EmbeddedWorkers() = default;

  worker::ExtractorFactory factory_;
  std::unique_ptr<::anisoscope::v1::WorkerService::Stub> stub_;
  std::vector<std::unique_ptr<worker::WorkerLoop>> loops_;
  std::vector<std::thread> threads_;
};

}  // namespace anisoscope::server
