// ChildProcess: a real program the benchmarks start (anisoscope-server, anisoscope-worker),
// as a user starts it; stopped (SIGTERM, then SIGKILL after 10 s) by the destructor.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::bench {

class ChildProcess {
 public:
  // Runs `argv` (argv[0] the binary), its stderr appended to `log_path`, and reads its
  // stdout until a line starting with each of `ready_prefixes` has come (the rest of its
  // output is read and dropped). UNAVAILABLE when it ends first, naming the log.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      std::vector<std::string> argv, const std::string& log_path,
      const std::vector<std::string>& ready_prefixes);
  ~ChildProcess();

  // What followed `prefix` on its line (one of the ready prefixes).
  std::string After(const std::string& prefix) const;
  pid_t pid() const { return pid_; }
  // Its resident memory (VmRSS), in KiB; -1 when it cannot be read.
  long RssKib() const;

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  std::map<std::string, std::string> ready_;
};

// anisoscope-server on `args` plus --listen 127.0.0.1:0 --http-listen 127.0.0.1:0; `grpc`
// and `http` receive the HOST:PORT it bound.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartServer(const std::string& binary,
                                                          const std::vector<std::string>& args,
                                                          const std::string& log_path,
                                                          std::string* grpc, std::string* http);

// A program beside the running benchmark's executable (build/bin).
std::string BinaryBesideThisOne(const std::string& name);

}  // namespace anisoscope::bench
