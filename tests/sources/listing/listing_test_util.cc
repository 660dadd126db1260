#include "tests/sources/listing/listing_test_util.h"

#include <curl/curl.h>

#include <cstdlib>
#include <fstream>
#include <utility>

namespace anisoscope::listing::testing {

absl::StatusOr<std::unique_ptr<ServerProcess>> StartHub(const std::filesystem::path& root,
                                                        const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--root", root.string(), "--port", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return ServerProcess::Start("hub_server.py", std::move(args), 2, /*graceful=*/true);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> StartS3(const std::string& bucket,
                                                       const std::filesystem::path& fixtures) {
  return ServerProcess::Start(
      "s3_server.py",
      {"--bucket", bucket, "--fixtures", fixtures.string(), "--prefix", "", "--port", "0"}, 4,
      /*graceful=*/true);
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "listing-XXXXXX").string();
  path_ = mkdtemp(pattern.data());
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void WriteFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

std::unique_ptr<transfer::HttpClient> TestClient(transfer::Credentials credentials) {
  transfer::TransferOptions options;
  options.max_attempts = 2;
  options.initial_backoff = absl::Milliseconds(20);
  options.stall_timeout = absl::Seconds(20);
  return *transfer::HttpClient::Create(options, std::move(credentials));
}

absl::StatusOr<nlohmann::json> ServerStats(const std::string& url) {
  auto client = TestClient();
  transfer::GetRequest request;
  request.url = url + "/_stats";
  absl::StatusOr<transfer::HttpResponse> response = client->Get(request);
  if (!response.ok()) return response.status();
  return nlohmann::json::parse(response->body);
}

absl::Status AddFault(const std::string& url, const nlohmann::json& rule) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  const std::string target = url + "/_control";
  const std::string body = rule.dump();
  curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION,
      +[](char*, size_t size, size_t count, void*) { return size * count; });
  const CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK || status != 200) return absl::InternalError("POST /_control failed");
  return absl::OkStatus();
}

}  // namespace anisoscope::listing::testing
