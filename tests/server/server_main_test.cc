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

#include "common/version.h"
#include "storage/schema.h"

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

// A temp folder for one test, removed at its end.
class ServerMainDirTest : public ServerMainTest {
 protected:
  void SetUp() override {
    ServerMainTest::SetUp();
    dir_ = fs::temp_directory_path() /
           ("server_main_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A server on 127.0.0.1:0 (and HTTP on 127.0.0.1:0 with `http`); its gRPC and HTTP ports.
  Child StartFirst(bool http, int* port, int* http_port) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--db", (dir_ / "a.db").string(),
                                     "--allow-root", dir_.string(), "--log-level", "warn"};
    if (http) args.insert(args.end(), {"--http-listen", "127.0.0.1:0"});
    Child child = Spawn(args);
    const std::string out = ReadUntil(child.out, http ? "dashboard at" : "listening on");
    *port = std::atoi(out.substr(out.find("127.0.0.1:") + 10).c_str());
    if (http) {
      const size_t at = out.find("http://127.0.0.1:");
      *http_port = at == std::string::npos ? 0 : std::atoi(out.substr(at + 17).c_str());
    }
    return child;
  }

  static void Stop(Child& child) {
    kill(child.pid, SIGTERM);
    EXPECT_EQ(WaitExit(child.pid), 0);
    close(child.out);
    close(child.err);
  }

  fs::path dir_;
};

TEST_F(ServerMainDirTest, SecondServerOnAUsedPortExitsNonZeroAndTouchesNoDatabase) {
  int port = 0, http_port = 0;
  Child first = StartFirst(/*http=*/false, &port, &http_port);
  ASSERT_GT(port, 0);
  const fs::path second_db = dir_ / "b" / "b.db";
  Child second = Spawn({"--listen", "127.0.0.1:" + std::to_string(port), "--db",
                        second_db.string(), "--allow-root", dir_.string(), "--log-level", "warn"});
  const std::string err = ReadUntil(second.err);
  ReadUntil(second.out);
  EXPECT_EQ(WaitExit(second.pid), 1);
  EXPECT_EQ(err, "anisoscope-server: cannot start: --listen 127.0.0.1:" + std::to_string(port) +
                     ": address already in use: is another anisoscope-server running?\n");
  EXPECT_FALSE(fs::exists(second_db.parent_path()));
  close(second.out);
  close(second.err);
  Stop(first);
}

TEST_F(ServerMainDirTest, AnUnreadableAlarmRulesFileLeavesNoDatabaseBehind) {
  const fs::path db = dir_ / "c.db";
  Child child = Spawn({"--listen", "127.0.0.1:0", "--db", db.string(), "--allow-root",
                       dir_.string(), "--alarm-rules", (dir_ / "missing.toml").string(),
                       "--log-level", "warn"});
  const std::string err = ReadUntil(child.err);
  ReadUntil(child.out);
  EXPECT_NE(WaitExit(child.pid), 0);
  EXPECT_NE(err.find("--alarm-rules"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(db));
  close(child.out);
  close(child.err);
}

TEST_F(ServerMainDirTest, SecondServerOnAUsedHttpPortExitsNonZero) {
  int port = 0, http_port = 0;
  Child first = StartFirst(/*http=*/true, &port, &http_port);
  ASSERT_GT(http_port, 0);
  Child second =
      Spawn({"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:" + std::to_string(http_port),
             "--db", (dir_ / "b.db").string(), "--allow-root", dir_.string(), "--log-level",
             "warn"});
  const std::string err = ReadUntil(second.err);
  ReadUntil(second.out);
  EXPECT_EQ(WaitExit(second.pid), 1);
  EXPECT_EQ(err, "anisoscope-server: cannot start: --http-listen 127.0.0.1:" +
                     std::to_string(http_port) +
                     ": address already in use: is another anisoscope-server running?\n");
  close(second.out);
  close(second.err);
  Stop(first);
}

TEST_F(ServerMainDirTest, NewDatabaseUnderAMissingFolderIsSaidOutLoud) {
  const fs::path db = dir_ / "typo" / "m.db";
  Child child = Spawn({"--listen", "127.0.0.1:0", "--db", db.string(), "--allow-root",
                       dir_.string(), "--log-level", "warn"});
  const std::string out = ReadUntil(child.out, "listening on");
  ASSERT_NE(out.find("listening on"), std::string::npos);
  kill(child.pid, SIGTERM);
  EXPECT_EQ(WaitExit(child.pid), 0);
  const std::string err = ReadUntil(child.err);
  EXPECT_NE(err.find("new database " + db.string() + ": its folder " + (dir_ / "typo").string() +
                     " did not exist and was created (meant an existing database? check --db)"),
            std::string::npos)
      << err;
  close(child.out);
  close(child.err);
}

TEST_F(ServerMainTest, VersionNamesTheProjectAndSchemaVersions) {
  Child child = Spawn({"--version"});
  const std::string out = ReadUntil(child.out);
  EXPECT_EQ(WaitExit(child.pid), 0);
  EXPECT_EQ(out, "anisoscope-server " + std::string(ProjectVersion()) + " (database schema " +
                     std::to_string(storage::LatestSchemaVersion()) + ")\n");
  close(child.out);
  close(child.err);
  const fs::path worker = ServerBinary().parent_path() / "anisoscope-worker";
  if (!fs::exists(worker)) GTEST_SKIP() << "anisoscope-worker not built";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    close(pipe_fds[0]);
    execl(worker.c_str(), worker.c_str(), "--version", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  EXPECT_EQ(ReadUntil(pipe_fds[0]), "anisoscope-worker " + std::string(ProjectVersion()) +
                                        " (database schema " +
                                        std::to_string(storage::LatestSchemaVersion()) + ")\n");
  EXPECT_EQ(WaitExit(pid), 0);
  close(pipe_fds[0]);
}

}  // namespace
}  // namespace anisoscope::server
