#include "bench/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace anisoscope::bench {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    std::vector<std::string> argv, const std::string& log_path,
    const std::vector<std::string>& ready_prefixes) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) dup2(log, STDERR_FILENO);
    close(out[0]);
    std::vector<char*> raw;
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    execv(raw[0], raw.data());
    _exit(127);
  }
  close(out[1]);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  FILE* lines = fdopen(out[0], "r");
  char line[1024];
  while (child->ready_.size() < ready_prefixes.size() &&
         fgets(line, sizeof(line), lines) != nullptr) {
    const absl::string_view text = absl::StripTrailingAsciiWhitespace(line);
    for (const std::string& prefix : ready_prefixes) {
      if (absl::StartsWith(text, prefix) && child->ready_.count(prefix) == 0) {
        child->ready_[prefix] = std::string(text.substr(prefix.size()));
      }
    }
  }
  // Keep reading (and dropping) its stdout so that it never blocks on a full pipe.
  std::thread([lines] {
    char rest[1024];
    while (fgets(rest, sizeof(rest), lines) != nullptr) {
    }
    fclose(lines);
  }).detach();
  if (child->ready_.size() < ready_prefixes.size()) {
    return absl::UnavailableError(absl::StrCat(argv[0], " did not start; its log is ", log_path));
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string ChildProcess::After(const std::string& prefix) const {
  const auto found = ready_.find(prefix);
  return found == ready_.end() ? "" : found->second;
}

long ChildProcess::RssKib() const {
  std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view text = line;
    if (absl::ConsumePrefix(&text, "VmRSS:")) {
      long kib = -1;
      absl::ConsumeSuffix(&text, " kB");
      return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &kib) ? kib : -1;
    }
  }
  return -1;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> StartServer(const std::string& binary,
                                                          const std::vector<std::string>& args,
                                                          const std::string& log_path,
                                                          std::string* grpc, std::string* http) {
  std::vector<std::string> argv = {binary, "--listen", "127.0.0.1:0", "--http-listen",
                                   "127.0.0.1:0"};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> server =
      ChildProcess::Start(argv, log_path, {"listening on ", "dashboard at http://"});
  if (!server.ok()) return server.status();
  *grpc = (*server)->After("listening on ");
  *http = std::string(absl::StripSuffix((*server)->After("dashboard at http://"), "/"));
  return server;
}

std::string BinaryBesideThisOne(const std::string& name) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return (self.parent_path() / name).string();
}

}  // namespace anisoscope::bench
