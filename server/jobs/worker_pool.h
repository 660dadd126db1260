// WorkerPool: the server's embedded workers (--workers N), whichever way they run: as
// anisoscope-worker processes (WorkerProcesses, the server's own way) or as threads sharing
// the server's process (EmbeddedWorkers: tests and benchmarks with a fake engine).
#pragma once

namespace anisoscope::server {

class WorkerPool {
 public:
  virtual ~WorkerPool() = default;
  // Stops the workers: each gives its lease back, or is stopped. Blocks; idempotent.
  virtual void Stop() = 0;
};

}  // namespace anisoscope::server
