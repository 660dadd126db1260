// The anisoscope-server binary: flag errors, the "listening on" line, SIGTERM -> exit 0.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace anisoscope::server {
namespace {

namespace fs = std::filesystem;

fs::path ServerBinary() {
  const char* bin = std::getenv("ANISOSCOPE_BIN");
  return bin == nullptr ? fs::path() : fs::path(bin) / "anisoscope-server";
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of stdout
  int err = -1;  // read end of stderr
};

Child Spawn(const std::vector<std::string>& args) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return {};
  Child child;
  child.pid = fork();
  if (child.pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    std::vector<char*> argv;
    const std::string binary = ServerBinary().string();
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  child.out = out[0];
  child.err = err[0];
  return child;
}

// Reads `fd` until EOF, or until `stop` appears followed by a newline when given.
std::string ReadUntil(int fd, const std::string& stop = "") {
  std::string text;
  char buffer[256];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (!stop.empty()) {
      const size_t at = text.find(stop);
      if (at != std::string::npos && text.find('\n', at) != std::string::npos) break;
    }
  }
  return text;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class ServerMainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(ServerBinary())) GTEST_SKIP() << "anisoscope-server not built";
  }
};

TEST_F(ServerMainTest, BadFlagIsOneLineOnStderrAndExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--bogus"}, std::vector<std::string>{},
        std::vector<std::string>{"--allow-root", "/tmp", "--workers", "-1"},
        std::vector<std::string>{"--allow-root", "/nonexistent/anisoscope-root"}}) {
    Child child = Spawn(args);
    ASSERT_GT(child.pid, 0);
    const std::string err = ReadUntil(child.err);
    ReadUntil(child.out);
    EXPECT_EQ(WaitExit(child.pid), 2);
    ASSERT_FALSE(err.empty());
    EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
    close(child.out);
    close(child.err);
  }
}

TEST_F(ServerMainTest, HelpExitsZero) {
  Child child = Spawn({"--help"});
  const std::string out = ReadUntil(child.out);
  EXPECT_EQ(WaitExit(child.pid), 0);
  EXPECT_NE(out.find("--allow-root"), std::string::npos);
  close(child.out);
  close(child.err);
}

TEST_F(ServerMainTest, PrintsPortAndExitsZeroOnSigterm) {
  const fs::path dir = fs::temp_directory_path() / ("server_main_" + std::to_string(getpid()));
  fs::create_directories(dir);
  Child child = Spawn({"--listen", "127.0.0.1:0", "--db", (dir / "m.db").string(), "--allow-root",
                       dir.string(), "--log-level", "warn"});
  ASSERT_GT(child.pid, 0);
  const std::string out = ReadUntil(child.out, "listening on 127.0.0.1:");
  ASSERT_NE(out.find("listening on 127.0.0.1:"), std::string::npos) << out;
  const int port = std::atoi(out.substr(out.find(':') + 1).c_str());
  EXPECT_GT(port, 0);
  kill(child.pid, SIGTERM);
  EXPECT_EQ(WaitExit(child.pid), 0);
  close(child.out);
  close(child.err);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace anisoscope::server
