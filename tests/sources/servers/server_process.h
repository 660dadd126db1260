// The test servers of this folder (hub_server.py, s3_server.py) as child processes of a
// C++ test, with their control endpoints (faults, counters), and what they need to run:
// what the listing and fetch tests share. The scripts are found through
// ANISOSCOPE_SOURCE_DIR (set by anisoscope_gtest) and run by /usr/bin/python3. A missing
// prerequisite fails a test when CI is set (InCi) and skips it elsewhere.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::source_servers {

// Whether a missing prerequisite fails (CI set, not "false" or "0") rather than skips.
bool InCi();
// This folder (ANISOSCOPE_SOURCE_DIR/tests/sources/servers); empty when the variable is not set.
std::filesystem::path ServersDir();
// Why the servers cannot run here, or "" when they can; `s3` adds node, s3rver and s3cmd.
std::string PrerequisiteMissing(bool s3);

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

}  // namespace anisoscope::source_servers
