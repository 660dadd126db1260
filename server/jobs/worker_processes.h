// WorkerProcesses: the server's embedded workers (--workers N) as anisoscope-worker
// processes it starts and watches, so that no checkpoint byte is parsed in the server's
// address space: a hostile file can take a worker down, never the server.
//
// Each worker speaks the lease protocol remote workers speak, over the server's private Unix
// socket (worker_socket.h: no port, no token; kEmbeddedWorkerKey, passed in its
// environment, marks its calls). It reads beneath the server's --allow-root and runs under
// the server's --worker-memory-max and --step-timeout (worker/step_bounds.h). A worker that
// exits or is killed while holding a step fails that step, saying why
// (JobRunner::FailLocalLeases), and another is started in its place (after a backoff when
// it died soon after starting). A cancel kills at once the worker running the cancelled
// step: a step stuck in a reader never polls for it. Stop sends SIGTERM (each gives its
// lease back) and SIGKILL to those still alive after kStopGrace. Start and Stop are called
// from one thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/jobs/job_runner.h"
#include "server/jobs/worker_pool.h"

namespace anisoscope::server {

// How long a stopping worker has to give its lease back before it is killed.
inline constexpr absl::Duration kStopGrace = absl::Seconds(2);

class WorkerProcesses final : public WorkerPool {
 public:
  struct Options {
    int count = 1;
    std::string binary;                     // the anisoscope-worker executable
    std::string server;                     // where to lease: the WorkerSocket's address
    std::vector<std::string> allow_roots;   // the server's --allow-root
    std::vector<std::string> engine_args;   // worker::WorkerEngineArgs of the server's flags
    std::vector<std::string> source_args;   // worker::WorkerSourceArgs of the server's flags
    std::string key;                        // kEmbeddedWorkerKey's value for this start
    std::string log_level = "info";
  };

  // Starts `options.count` workers named embedded-1 … embedded-N, leasing from
  // options.server. `runner` hears of their deaths and tells of cancels; not owned, it
  // outlives this. An error when the binary cannot be run.
  static absl::StatusOr<std::unique_ptr<WorkerProcesses>> Start(const Options& options,
                                                                JobRunner* runner);
  ~WorkerProcesses() override;  // Stop.

  void Stop() override;

  // The workers' process ids now (-1 while one is being restarted), by name (tests).
  std::vector<pid_t> pids() const;

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    absl::Time started;
    absl::Time restart_at;  // when a dead one is started again
    int quick_deaths = 0;   // consecutive deaths soon after starting
    bool killed_for_cancel = false;
  };

  WorkerProcesses(const Options& options, JobRunner* runner)
      : options_(options), runner_(runner) {}

  // Starts `child`'s process.
  absl::Status Spawn(Child* child) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reaps, fails the steps of the dead, restarts them; until Stop has reaped every one.
  void Supervise();
  // A worker that died: its step fails with why, and it is started again later.
  void Died(Child* child, int wait_status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // JobRunner's cancel listener: kills the workers running a cancelled step.
  void KillRunning(const std::set<std::string>& workers);

  const Options options_;
  JobRunner* const runner_;
  std::vector<std::string> environment_;  // the server's, with the key, without its own

  mutable absl::Mutex mu_;
  std::vector<Child> children_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time kill_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::thread supervisor_;
  bool stopped_ = false;
};

}  // namespace anisoscope::server
