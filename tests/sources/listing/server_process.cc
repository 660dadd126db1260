#include "tests/sources/listing/server_process.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace anisoscope::listing::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

std::filesystem::path ServersDir() {
  const char* source = std::getenv("ANISOSCOPE_SOURCE_DIR");
  return std::filesystem::path(source != nullptr ? source : ".") / "tests/sources/servers";
}

bool OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string all = path;
  size_t start = 0;
  while (start <= all.size()) {
    const size_t end = all.find(':', start);
    const std::string dir =
        all.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && access((std::filesystem::path(dir) / name).c_str(), X_OK) == 0) {
      return true;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

}  // namespace

bool InCi() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr || *ci == '\0') return false;
  const std::string value = ci;
  return value != "false" && value != "0";
}

std::string PrerequisiteMissing(bool s3) {
  if (std::getenv("ANISOSCOPE_SOURCE_DIR") == nullptr) return "ANISOSCOPE_SOURCE_DIR is not set";
  if (access(kPython, X_OK) != 0) return "/usr/bin/python3 is missing";
  if (!std::filesystem::exists(ServersDir() / "hub_server.py")) return "hub_server.py is missing";
  if (!s3) return "";
  if (!OnPath("node")) return "node is not installed (apt-get install nodejs)";
  if (!OnPath("s3cmd")) return "s3cmd is not installed (apt-get install s3cmd)";
  if (!std::filesystem::exists(ServersDir() / "node_modules/s3rver/package.json")) {
    return "the npm module s3rver is missing: run `npm ci --no-audit --no-fund` in "
           "tests/sources/servers";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& argv, int lines) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::unique_ptr<ServerProcess> process(new ServerProcess(pid, pipe_fds[0]));
  std::string buffer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (static_cast<int>(process->lines_.size()) < lines) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return absl::DeadlineExceededError("the server did not start");
    pollfd fd{process->out_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(process->out_, chunk, sizeof(chunk));
    if (n <= 0) return absl::UnavailableError(absl::StrCat(argv[1], " exited before it served"));
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t end; (end = buffer.find('\n')) != std::string::npos;) {
      process->lines_.push_back(buffer.substr(0, end));
      buffer.erase(0, end + 1);
    }
  }
  return process;
}

ServerProcess::~ServerProcess() {
  kill(pid_, SIGTERM);
  for (int i = 0; i < 1000; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      close(out_);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  close(out_);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> StartHub(const std::filesystem::path& root,
                                                        const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      kPython, (ServersDir() / "hub_server.py").string(), "--root", root.string(), "--port", "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return ServerProcess::Start(argv, 2);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> StartS3(const std::string& bucket,
                                                       const std::filesystem::path& fixtures) {
  return ServerProcess::Start(
      {kPython, (ServersDir() / "s3_server.py").string(), "--bucket", bucket, "--fixtures",
       fixtures.string(), "--prefix", "", "--port", "0"},
      4);
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
