#include "tests/sources/servers/server_process.h"

#include <curl/curl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace anisoscope::source_servers {
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

// Whether `name` is an executable in a folder of PATH.
bool OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    if (access((std::filesystem::path(std::string(dir)) / name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

bool InCi() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string value = ci;
  return !value.empty() && value != "false" && value != "0";
}

std::filesystem::path ServersDir() {
  const char* source_dir = std::getenv("ANISOSCOPE_SOURCE_DIR");
  if (source_dir == nullptr) return {};
  return std::filesystem::path(source_dir) / "tests" / "sources" / "servers";
}

std::string PrerequisiteMissing(bool s3) {
  if (ServersDir().empty()) return "ANISOSCOPE_SOURCE_DIR is not set (run the test through ctest)";
  if (access(kPython, X_OK) != 0) return "/usr/bin/python3 is missing (apt-get install python3)";
  if (!std::filesystem::exists(ServersDir() / "hub_server.py")) return "hub_server.py is missing";
  if (!s3) return "";
  if (!OnPath("node")) return "node is not installed (apt-get install nodejs)";
  if (!OnPath("s3cmd")) return "s3cmd is not installed (apt-get install s3cmd)";
  if (!std::filesystem::exists(ServersDir() / "node_modules" / "s3rver" / "package.json")) {
    return "the npm module s3rver is missing: run `npm ci --no-audit --no-fund` in "
           "tests/sources/servers";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const std::string& script,
                                                                    std::vector<std::string> args,
                                                                    int lines, bool graceful) {
  if (ServersDir().empty()) {
    return absl::FailedPreconditionError(
        "ANISOSCOPE_SOURCE_DIR is not set (run the test through ctest)");
  }
  const std::string path = (ServersDir() / script).string();
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
    // The server dies with the test, even one that crashes before its destructor runs, and
    // holds none of the test's descriptors (a build lock taken by flock(1) among them).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out[1], STDOUT_FILENO);
    close_range(STDERR_FILENO + 1, ~0U, 0);
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

}  // namespace anisoscope::source_servers
