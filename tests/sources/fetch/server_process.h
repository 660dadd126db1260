// A test server of tests/sources/servers (hub_server.py, s3_server.py) as a child process,
// with its control endpoints (faults, counters). The script is found through
// ANISOSCOPE_SOURCE_DIR (set by anisoscope_gtest) and run by /usr/bin/python3.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::fetch::testing {

class ServerProcess {
 public:
  // Runs `script` (a file name in tests/sources/servers) with `args` and waits for the
  // `lines` lines it prints first (the URL first). `graceful`: stopped by SIGTERM (a server
  // with children and temp folders of its own to clean up), else by SIGKILL. The child leads
  // its own process group. FAILED_PRECONDITION (saying what to install) when python3 or the
  // script is missing; INTERNAL when it does not start.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const std::string& script,
                                                              std::vector<std::string> args,
                                                              int lines, bool graceful = false);
  // The folder of the test servers (ANISOSCOPE_SOURCE_DIR/tests/sources/servers); empty
  // when the variable is not set.
  static std::string ServersDir();
  ~ServerProcess();  // stops it (see Start; SIGKILL to its group after 10 s) and waits
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& url() const { return lines_[0]; }  // "http://127.0.0.1:PORT"
  const std::vector<std::string>& lines() const { return lines_; }

  // `method` ("GET", "POST", "DELETE") on `path` ("/_control", "/_stats") with a JSON body;
  // the answer's body, or an error for a non-2xx status.
  absl::StatusOr<std::string> Control(const std::string& method, const std::string& path,
                                      const std::string& body = "") const;
  // POST /_control with one rule.
  absl::Status AddFault(const std::string& rule_json) const;
  // GET /_stats, as JSON text.
  std::string Stats() const;
  // DELETE /_stats.
  void ResetStats() const;

 private:
  ServerProcess(pid_t pid, int stdout_fd, std::vector<std::string> lines, bool graceful)
      : pid_(pid), stdout_fd_(stdout_fd), lines_(std::move(lines)), graceful_(graceful) {}
  pid_t pid_;
  int stdout_fd_;  // kept open so that the server never writes into a closed pipe
  std::vector<std::string> lines_;
  bool graceful_;
};

}  // namespace anisoscope::fetch::testing
