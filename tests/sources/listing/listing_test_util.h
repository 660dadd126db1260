// What the listing tests share: the local Hub and S3 test servers started as they need them
// (tests/sources/servers/server_process.h), temp folders, files, a test client, and the
// servers' /_control and /_stats by URL.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sources/transfer/http_client.h"
#include "tests/sources/servers/server_process.h"

namespace anisoscope::listing::testing {

using source_servers::InCi;
using source_servers::PrerequisiteMissing;
using source_servers::ServerProcess;

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
