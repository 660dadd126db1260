// WorkerSocket: where the server's own worker processes reach it: a Unix socket in a private
// directory (mode 0700, made with mkdtemp under $TMPDIR), so that only the server's user can
// connect, and the per-start key still marks the calls. Removed with the object.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace anisoscope::server {

class WorkerSocket {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerSocket>> Create();
  ~WorkerSocket();  // removes the socket and its directory
  WorkerSocket(const WorkerSocket&) = delete;
  WorkerSocket& operator=(const WorkerSocket&) = delete;

  // "unix:/tmp/anisoscope-workers-XXXXXX/socket": for ServerBuilder and --server.
  std::string address() const { return "unix:" + path_; }

 private:
  WorkerSocket(std::string dir, std::string path) : dir_(std::move(dir)), path_(std::move(path)) {}
  const std::string dir_;
  const std::string path_;
};

}  // namespace anisoscope::server
