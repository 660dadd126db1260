// ServerProcess: a real anisoscope-server started by a benchmark, as a user starts it, on
// loopback ports it picks itself; stopped (SIGTERM, then SIGKILL) by the destructor.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::bench {

class ServerProcess {
 public:
  // Runs `binary` with `args` plus --listen 127.0.0.1:0 and --http-listen 127.0.0.1:0 and
  // waits for its "listening on" and "dashboard at" lines. Its log goes to `log_path`.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const std::string& binary,
                                                              const std::vector<std::string>& args,
                                                              const std::string& log_path);
  ~ServerProcess();

  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& http_address() const { return http_address_; }  // HOST:PORT
  pid_t pid() const { return pid_; }
  // The process's resident memory (VmRSS), in KiB; -1 when it cannot be read.
  long RssKib() const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  std::string grpc_address_;
  std::string http_address_;
};

// anisoscope-server beside the running benchmark's executable (build/bin).
std::string BinaryBesideThisOne(const std::string& name);

}  // namespace anisoscope::bench
