#include "tests/sources/fetch/server_process.h"

#include <curl/curl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace anisoscope::fetch::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// The first line the child writes, within `timeout`; empty on EOF or timeout.
std::string ReadLine(int fd, std::chrono::milliseconds timeout) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd wait{fd, POLLIN, 0};
    if (poll(&wait, 1, static_cast<int>(left.count())) <= 0) continue;
    char c = 0;
    if (read(fd, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line.push_back(c);
  }
}

}  // namespace

std::string ServerProcess::ServersDir() {
  const char* source_dir = std::getenv("ANISOSCOPE_SOURCE_DIR");
  if (source_dir == nullptr) return "";
  return absl::StrCat(source_dir, "/tests/sources/servers");
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const std::string& script,
                                                                    std::vector<std::string> args,
                                                                    int lines, bool graceful) {
  if (ServersDir().empty()) {
    return absl::FailedPreconditionError(
        "ANISOSCOPE_SOURCE_DIR is not set (run the test through ctest)");
  }
  const std::string path = absl::StrCat(ServersDir(), "/", script);
  if (!std::filesystem::exists(path)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is missing"));
  }
  if (access(kPython, X_OK) != 0) {
    return absl::FailedPreconditionError("/usr/bin/python3 is missing (apt-get install python3)");
  }
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<const char*> argv = {kPython, path.c_str()};
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    argv.push_back(nullptr);
    execv(kPython, const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  close(out[1]);
  std::vector<std::string> printed;
  for (int i = 0; i < lines; ++i) {
    printed.push_back(ReadLine(out[0], std::chrono::seconds(30)));
  }
  if (printed.empty() || !absl::StartsWith(printed[0], "http://")) {
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(out[0]);
    return absl::InternalError(absl::StrCat(script, " did not print its URL"));
  }
  return std::unique_ptr<ServerProcess>(
      new ServerProcess(pid, out[0], std::move(printed), graceful));
}

ServerProcess::~ServerProcess() {
  kill(pid_, graceful_ ? SIGTERM : SIGKILL);
  for (int waited_ms = 0; waitpid(pid_, nullptr, WNOHANG) == 0; waited_ms += 20) {
    if (waited_ms >= 10000) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      break;
    }
    usleep(20 * 1000);
  }
  close(stdout_fd_);
}

absl::StatusOr<std::string> ServerProcess::Control(const std::string& method,
                                                   const std::string& path,
                                                   const std::string& body) const {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  std::string answer;
  const std::string target = url() + path;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!body.empty()) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
  const CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK || status < 200 || status >= 300) {
    return absl::InternalError(
        absl::StrCat(method, " ", path, ": curl ", code, ", HTTP ", status, ": ", answer));
  }
  return answer;
}

absl::Status ServerProcess::AddFault(const std::string& rule_json) const {
  return Control("POST", "/_control", rule_json).status();
}

std::string ServerProcess::Stats() const { return Control("GET", "/_stats").value_or(""); }

void ServerProcess::ResetStats() const { Control("DELETE", "/_stats").IgnoreError(); }

}  // namespace anisoscope::fetch::testing
