#include "server/server_options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace anisoscope::server {
namespace {

absl::StatusOr<ServerOptions> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "anisoscope-server");
  return ParseServerOptions(static_cast<int>(args.size()), args.data());
}

TEST(ServerOptionsTest, DefaultsNeedOnlyAnAllowedRoot) {
  auto options = Parse({"--allow-root", "/data"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->listen, "127.0.0.1:50051");
  EXPECT_EQ(options->db, "./anisoscope.db");
  EXPECT_EQ(options->allow_roots, std::vector<std::string>{"/data"});
  EXPECT_EQ(options->workers, 1);
  EXPECT_EQ(options->extractor.device, "cpu");
  EXPECT_EQ(options->extractor.dtype, "float32");
  EXPECT_EQ(options->extractor.num_threads, 0);
  EXPECT_EQ(options->extractor.batch_size, 0);  // automatic
  EXPECT_EQ(options->log_level, "info");
  EXPECT_EQ(options->max_leases_per_worker, 16);
  EXPECT_EQ(Parse({"--allow-root", "/a", "--max-leases-per-worker", "3"})->max_leases_per_worker,
            3);
}

TEST(ServerOptionsTest, EveryFlagMapsOntoItsField) {
  auto options = Parse({"--listen=0.0.0.0:0", "--db", "/tmp/x.db", "--allow-root", "/a",
                        "--allow-root=/b", "--workers", "3", "--device", "cuda:1", "--threads", "4",
                        "--batch-size", "16", "--dtype", "bfloat16", "--log-level", "debug"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->listen, "0.0.0.0:0");
  EXPECT_EQ(options->db, "/tmp/x.db");
  EXPECT_EQ(options->allow_roots, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(options->workers, 3);
  EXPECT_EQ(options->extractor.device, "cuda:1");
  EXPECT_EQ(options->extractor.num_threads, 4);
  EXPECT_EQ(options->extractor.batch_size, 16);
  EXPECT_EQ(options->extractor.dtype, "bfloat16");
  EXPECT_EQ(options->log_level, "debug");
  EXPECT_EQ(Parse({"--allow-root", "/a", "--listen", "127.0.0.1:1", "--listen=127.0.0.1:2"})
                ->listen,
            "127.0.0.1:2");  // the last one wins
}

TEST(ServerOptionsTest, BadFlagsAreOneLineErrors) {
  const std::vector<std::vector<const char*>> bad = {
      {},
      {"--allow-root", "/a", "--bogus"},
      {"--allow-root", "/a", "--workers", "two"},
      {"--allow-root", "/a", "--workers", "-1"},
      {"--allow-root", "/a", "--lease-timeout", "0"},
      {"--allow-root", "/a", "--max-attempts", "0"},
      {"--allow-root", "/a", "--max-leases-per-worker", "0"},
      {"--allow-root", "/a", "--device", "tpu"},
      {"--allow-root", "/a", "--dtype", "int8"},
      {"--allow-root", "/a", "--listen", "nocolon"},
      {"--allow-root", "/a", "--listen", ":50051"},
      {"--allow-root", "/a", "--listen", "127.0.0.1:65536"},
      {"--allow-root", "/a", "--listen", "::1:50051"},
      {"--allow-root", "/a", "--http-listen", "127.0.0.1:http"},
      {"--allow-root", "/a", "--threads", "x"},
      {"--allow-root", "/a", "--batch-size", "-1"},
      {"--allow-root", "/a", "--log-level", "loud"},
      {"--allow-root"},
      {"--allow-root", "/a", "stray"},
  };
  for (const auto& args : bad) {
    auto options = Parse(args);
    ASSERT_FALSE(options.ok()) << (args.empty() ? "(none)" : args.back());
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(options.status().message()).find('\n'), std::string::npos);
  }
}

TEST(ServerOptionsTest, CommandLineThenConfigFileThenEnvironment) {
  const std::string config =
      ::testing::TempDir() + "/server_options_test_" + std::to_string(::getpid()) + ".toml";
  std::ofstream(config) << "db = \"/srv/team.db\"\nallow-root = [\"/c1\", \"/c2\"]\n"
                        << "workers = 2\nhttp-listen = \"0.0.0.0:8080\"\n";
  auto from_file = Parse({"--config", config.c_str()});
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->db, "/srv/team.db");
  EXPECT_EQ(from_file->allow_roots, (std::vector<std::string>{"/c1", "/c2"}));
  EXPECT_EQ(from_file->workers, 2);
  EXPECT_EQ(from_file->http_listen, "0.0.0.0:8080");
  // The environment fills in what neither the command line nor the file sets.
  setenv("ANISOSCOPE_WORKERS", "5", 1);
  setenv("ANISOSCOPE_THREADS", "3", 1);
  auto with_env = Parse({"--config", config.c_str()});
  ASSERT_TRUE(with_env.ok()) << with_env.status();
  EXPECT_EQ(with_env->workers, 2);
  EXPECT_EQ(with_env->extractor.num_threads, 3);
  EXPECT_EQ(Parse({"--config", config.c_str(), "--workers", "7"})->workers, 7);
  setenv("ANISOSCOPE_THREADS", "many", 1);
  EXPECT_FALSE(Parse({"--config", config.c_str()}).ok());
  unsetenv("ANISOSCOPE_WORKERS");
  unsetenv("ANISOSCOPE_THREADS");
  std::ofstream(config) << "wokers = 2\nallow-root = [\"/c1\"]\n";
  const auto misspelt = Parse({"--config", config.c_str()});
  ASSERT_FALSE(misspelt.ok());
  EXPECT_NE(std::string(misspelt.status().message()).find("wokers"), std::string::npos)
      << misspelt.status();
  std::remove(config.c_str());
}

TEST(ServerOptionsTest, HelpNeedsNothingElseAndListsEveryFlag) {
  auto options = Parse({"--help"});
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->help);
  for (const char* flag :
       {"--listen", "--db", "--allow-root", "--workers", "--device", "--threads", "--batch-size",
        "--dtype", "--log-level", "--help", "--config", "--follow-interval", "--auth"}) {
    EXPECT_NE(ServerUsage().find(flag), std::string::npos) << flag;
  }
}

// Issue 28: "127.0.0.1.evil.example" began with "127." and passed for loopback.
TEST(ServerOptionsTest, LoopbackIsParsedExactly) {
  for (const char* loopback :
       {"127.0.0.1:50051", "127.0.0.1", "127.255.1.2:1", "localhost:8080", "LocalHost",
        "[::1]:8080", "[::1]", "::1", "[0:0:0:0:0:0:0:1]:80", "[::ffff:127.0.0.1]:80"}) {
    EXPECT_TRUE(IsLoopback(loopback)) << loopback;
  }
  for (const char* other : {"127.0.0.1.evil.example:80",
                            "127.evil.example",
                            "127.1:80",
                            "127.0.0.01:80",
                            "0127.0.0.1",
                            "128.0.0.1",
                            "0.0.0.0:80",
                            "[::2]:80",
                            "::1:50051",
                            "[::ffff:10.0.0.1]:80",
                            "localhost.evil.example",
                            "evil.localhost:80",
                            "127.0.0.1:",
                            "127.0.0.1:65536",
                            "127.0.0.1:8o",
                            "[::1",
                            "[::1]x",
                            "[127.0.0.1]:80",
                            "[::1]:",
                            "",
                            ":80"}) {
    EXPECT_FALSE(IsLoopback(other)) << other;
  }
  // A NUL cuts inet_pton's reading short: what follows it must still count.
  for (const absl::string_view other :
       {absl::string_view("127.0.0.1\0.evil.example", 23), absl::string_view("127.0.0.1\0:", 11),
        absl::string_view("[::1\0]]", 7), absl::string_view("localhost\0", 10)}) {
    EXPECT_FALSE(IsLoopback(other)) << absl::CEscape(other);
  }
  ServerOptions options;
  options.listen = "127.0.0.1.evil.example:50051";
  EXPECT_EQ(*AuthModeFor(options), AuthMode::kTokens);
  options.auth = "none";
  EXPECT_EQ(AuthModeFor(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerOptionsTest, HttpWallsHaveFlagsWithDefaults) {
  auto defaults = Parse({"--allow-root", "/a"});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->http_max_queued, 256);
  EXPECT_EQ(defaults->http_read_timeout_seconds, 5);
  EXPECT_EQ(defaults->http_write_timeout_seconds, 10);
  EXPECT_TRUE(defaults->cors_origins.empty());
  auto options = Parse({"--allow-root", "/a", "--http-max-queued", "0", "--http-read-timeout",
                        "1.5", "--http-write-timeout=30", "--cors-origin", "https://Dash.Example",
                        "--cors-origin", "http://localhost:5173"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->http_max_queued, 0);
  EXPECT_EQ(options->http_read_timeout_seconds, 1.5);
  EXPECT_EQ(options->http_write_timeout_seconds, 30);
  EXPECT_EQ(options->cors_origins,
            (std::vector<std::string>{"https://Dash.Example", "http://localhost:5173"}));
  for (const char* origin : {"*", "null", "https://dash.example/", "dash.example",
                             "ftp://dash.example", "https://user@dash.example", "https://:80"}) {
    const auto refused = Parse({"--allow-root", "/a", "--cors-origin", origin});
    ASSERT_FALSE(refused.ok()) << origin;
    EXPECT_NE(refused.status().message().find("--cors-origin"), std::string::npos)
        << refused.status();
  }
  EXPECT_FALSE(Parse({"--allow-root", "/a", "--http-read-timeout", "0"}).ok());
  EXPECT_FALSE(Parse({"--allow-root", "/a", "--http-max-queued", "-1"}).ok());
  for (const char* flag :
       {"--http-max-queued", "--http-read-timeout", "--http-write-timeout", "--cors-origin"}) {
    EXPECT_NE(ServerUsage().find(flag), std::string::npos) << flag;
  }
}

TEST(ServerOptionsTest, PerCallerBoundsHaveFlagsWithDefaults) {
  auto defaults = Parse({"--allow-root", "/a"});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->limits.max_series_points, 2'000'000);
  EXPECT_EQ(defaults->limits.max_vector_values, 8'388'608);
  EXPECT_EQ(defaults->limits.max_probe_tokens, 128 * 2048);
  EXPECT_EQ(defaults->limits.max_watch_streams, 1000);
  EXPECT_EQ(defaults->limits.max_watch_streams_per_caller, 16);
  EXPECT_EQ(defaults->limits.max_watch_streams_per_namespace, 100);
  auto options =
      Parse({"--allow-root", "/a", "--max-vector-values", "7", "--max-probe-tokens", "9",
             "--max-watch-streams-per-caller", "2", "--max-watch-streams-per-namespace=3"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->limits.max_vector_values, 7);
  EXPECT_EQ(options->limits.max_probe_tokens, 9);
  EXPECT_EQ(options->limits.max_watch_streams_per_caller, 2);
  EXPECT_EQ(options->limits.max_watch_streams_per_namespace, 3);
  for (const char* flag : {"--max-vector-values", "--max-probe-tokens",
                           "--max-watch-streams-per-caller", "--max-watch-streams-per-namespace"}) {
    EXPECT_FALSE(Parse({"--allow-root", "/a", flag, "0"}).ok()) << flag;
    EXPECT_NE(ServerUsage().find(flag), std::string::npos) << flag;
  }
}

TEST(ServerOptionsTest, TakesTheExtractorFlagsTheWorkerTakes) {
  const absl::StatusOr<ServerOptions> options =
      Parse({"--allow-root", "/a", "--allow-tf32", "--listen", "[::1]:0"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->extractor.allow_tf32);
  EXPECT_EQ(options->listen, "[::1]:0");
  EXPECT_FALSE(Parse({"--allow-root", "/a"})->extractor.allow_tf32);
  for (const char* flag : {"--device", "--dtype", "--threads", "--batch-size", "--allow-tf32"}) {
    EXPECT_NE(ServerUsage().find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace anisoscope::server
