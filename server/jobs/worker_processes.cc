#include "server/jobs/worker_processes.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/embedded_worker_key.h"
#include "worker/step_watchdog.h"

extern char** environ;

namespace anisoscope::server {
namespace {

constexpr absl::Duration kTick = absl::Milliseconds(100);
// A worker that dies sooner than this after starting is restarted after a growing backoff.
constexpr absl::Duration kQuickDeath = absl::Seconds(5);
constexpr absl::Duration kMaxBackoff = absl::Seconds(30);

// The server's environment for a worker: without the variables that would point it
// elsewhere (its server, a token), with the key.
std::vector<std::string> WorkerEnvironment(const std::string& key) {
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string entry = *variable;
    if (absl::StartsWith(entry, "ANISOSCOPE_SERVER=") ||
        absl::StartsWith(entry, "ANISOSCOPE_TOKEN=") ||
        absl::StartsWith(entry, absl::StrCat(kEmbeddedWorkerKeyVariable, "="))) {
      continue;
    }
    environment.push_back(entry);
  }
  environment.push_back(absl::StrCat(kEmbeddedWorkerKeyVariable, "=", key));
  return environment;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Why a worker that held a step died, for the step's error.
std::string DeathOf(const std::string& name, int wait_status) {
  const std::string who = absl::StrCat("embedded worker '", name, "'");
  if (WIFEXITED(wait_status)) {
    return absl::StrCat(who, " exited with code ", WEXITSTATUS(wait_status),
                        " while running this step");
  }
  const int signal_number = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  const std::string what =
      absl::StrCat(who, " was killed by signal ", signal_number, " (", strsignal(signal_number),
                   ") while running this step");
  if (signal_number == SIGKILL) {
    return absl::StrCat(what,
                        ": the kernel's out-of-memory killer, or an operator; the checkpoint "
                        "may need more memory than this machine or --worker-memory-max allows");
  }
  return absl::StrCat(what, ": the checkpoint's files may be malformed or hostile");
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcesses>> WorkerProcesses::Start(const Options& options,
                                                                         JobRunner* runner) {
  std::unique_ptr<WorkerProcesses> workers(new WorkerProcesses(options, runner));
  if (options.count == 0) return workers;
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run the embedded workers: '", options.binary,
                     "' (anisoscope-worker, beside anisoscope-server) is not an executable: ",
                     std::strerror(errno)));
  }
  workers->environment_ = WorkerEnvironment(options.key);
  {
    absl::MutexLock lock(&workers->mu_);
    for (int i = 1; i <= options.count; ++i) {
      Child& child = workers->children_.emplace_back();
      child.name = absl::StrCat("embedded-", i);
    }
    for (Child& child : workers->children_) {
      if (absl::Status spawned = workers->Spawn(&child); !spawned.ok()) {
        for (Child& started : workers->children_) {
          if (started.pid <= 0) continue;
          kill(started.pid, SIGKILL);
          waitpid(started.pid, nullptr, 0);
          started.pid = -1;
        }
        workers->stopped_ = true;
        return spawned;
      }
    }
  }
  runner->SetLocalCancelListener(
      [raw = workers.get()](const std::set<std::string>& names) { raw->KillRunning(names); });
  workers->supervisor_ = std::thread([raw = workers.get()] { raw->Supervise(); });
  return workers;
}

WorkerProcesses::~WorkerProcesses() { Stop(); }

void WorkerProcesses::Stop() {
  if (stopped_) return;
  stopped_ = true;
  runner_->SetLocalCancelListener(nullptr);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    kill_at_ = absl::Now() + kStopGrace;
    for (const Child& child : children_) {
      if (child.pid > 0) kill(child.pid, SIGTERM);
    }
  }
  if (supervisor_.joinable()) supervisor_.join();
}

std::vector<pid_t> WorkerProcesses::pids() const {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> pids;
  for (const Child& child : children_) pids.push_back(child.pid);
  return pids;
}

absl::Status WorkerProcesses::Spawn(Child* child) {
  std::vector<std::string> args = {options_.binary, "--server",    options_.server,
                                   "--name",        child->name, "--log-level",
                                   options_.log_level};
  args.insert(args.end(), options_.engine_args.begin(), options_.engine_args.end());
  args.insert(args.end(), options_.source_args.begin(), options_.source_args.end());
  for (const std::string& root : options_.allow_roots) {
    args.push_back("--allow-root");
    args.push_back(root);
  }
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(environment_);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the server
    dup2(STDERR_FILENO, STDOUT_FILENO);  // its "started" line to the server's log
    close_range(STDERR_FILENO + 1, ~0U, 0);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  child->pid = pid;
  child->started = absl::Now();
  child->killed_for_cancel = false;
  spdlog::info("embedded worker {} started (pid {})", child->name, pid);
  return absl::OkStatus();
}

void WorkerProcesses::Supervise() {
  while (true) {
    std::vector<std::pair<std::string, std::string>> failed;  // (worker, why)
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      if (stopping_ && now >= kill_at_) {
        for (Child& child : children_) {
          if (child.pid > 0) kill(child.pid, SIGKILL);
        }
      }
      bool alive = false;
      for (Child& child : children_) {
        if (child.pid > 0) {
          int wait_status = 0;
          const pid_t reaped = waitpid(child.pid, &wait_status, WNOHANG);
          if (reaped == child.pid || (reaped < 0 && errno == ECHILD)) {
            if (!stopping_ && !child.killed_for_cancel &&
                !(WIFEXITED(wait_status) &&
                  WEXITSTATUS(wait_status) == worker::kStepAbandonedExitCode)) {
              failed.emplace_back(child.name, DeathOf(child.name, wait_status));
            }
            Died(&child, wait_status);
          }
        }
        if (child.pid > 0) {
          alive = true;
        } else if (!stopping_ && now >= child.restart_at) {
          if (absl::Status spawned = Spawn(&child); !spawned.ok()) {
            spdlog::error("embedded worker {} not restarted: {}", child.name, spawned.ToString());
            child.restart_at = now + kMaxBackoff;
          }
        }
      }
      if (stopping_ && !alive) return;
    }
    for (const auto& [name, why] : failed) runner_->FailLocalLeases(name, why);
    absl::SleepFor(kTick);
  }
}

void WorkerProcesses::Died(Child* child, int wait_status) {
  const absl::Time now = absl::Now();
  const bool quick = now - child->started < kQuickDeath;
  child->quick_deaths = quick ? child->quick_deaths + 1 : 0;
  const absl::Duration backoff =
      quick ? std::min(kMaxBackoff, absl::Seconds(1) * (1 << std::min(child->quick_deaths, 5)))
            : absl::ZeroDuration();
  child->restart_at = now + backoff;
  if (!stopping_) {
    const std::string how =
        WIFEXITED(wait_status)
            ? absl::StrCat("exited with code ", WEXITSTATUS(wait_status))
            : absl::StrCat("was killed by signal ", WTERMSIG(wait_status));
    spdlog::warn("embedded worker {} (pid {}) {}{}; restarting in {}", child->name, child->pid,
                 how, child->killed_for_cancel ? " (its step was cancelled)" : "",
                 absl::FormatDuration(backoff));
  }
  child->pid = -1;
}

void WorkerProcesses::KillRunning(const std::set<std::string>& workers) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  for (Child& child : children_) {
    if (child.pid > 0 && workers.count(child.name) > 0) {
      kill(child.pid, SIGKILL);
      child.killed_for_cancel = true;
    }
  }
}

}  // namespace anisoscope::server
