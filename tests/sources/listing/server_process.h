// The local Hub and S3 test servers (tests/sources/servers/hub_server.py, s3_server.py) run
// as child processes of a test, found through ANISOSCOPE_SOURCE_DIR, plus the small helpers
// the listing tests share (temp folders, files, the servers' /_control and /_stats).
// Missing prerequisites: a failure when CI is set, else a skip (PrerequisiteMissing).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sources/transfer/http_client.h"

namespace anisoscope::listing::testing {

// Why the servers cannot run here ("" when they can); `s3` adds node, s3rver and s3cmd.
std::string PrerequisiteMissing(bool s3);
// Whether a missing prerequisite fails (CI set and not "false"/"0") rather than skips.
bool InCi();

// A child process started with argv, its stdout read line by line; SIGTERM (then SIGKILL
// after 10 s) and reaped when destroyed.
class ServerProcess {
 public:
  // Starts argv and reads stdout until `lines` lines came (within 60 s).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const std::vector<std::string>& argv,
                                                              int lines);
  ~ServerProcess();
  const std::vector<std::string>& lines() const { return lines_; }
  const std::string& url() const { return lines_.front(); }

 private:
  ServerProcess(pid_t pid, int out) : pid_(pid), out_(out) {}
  pid_t pid_;
  int out_;
  std::vector<std::string> lines_;
};

// python3 hub_server.py --root ROOT --port 0 EXTRA...
absl::StatusOr<std::unique_ptr<ServerProcess>> StartHub(const std::filesystem::path& root,
                                                        const std::vector<std::string>& extra);
// python3 s3_server.py --bucket BUCKET --fixtures DIR --prefix "" EXTRA...
absl::StatusOr<std::unique_ptr<ServerProcess>> StartS3(const std::string& bucket,
                                                       const std::filesystem::path& fixtures);

// A fresh folder under the system's temp folder, removed with its contents when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void WriteFile(const std::filesystem::path& path, const std::string& content);

// An HttpClient for tests: 2 attempts, short backoff, the credentials given.
std::unique_ptr<transfer::HttpClient> TestClient(transfer::Credentials credentials = {});

// GET url/_stats as JSON.
absl::StatusOr<nlohmann::json> ServerStats(const std::string& url);
// POST url/_control with a fault rule.
absl::Status AddFault(const std::string& url, const nlohmann::json& rule);

}  // namespace anisoscope::listing::testing
