#include "server/server_options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

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
      {"--allow-root", "/a", "--device", "tpu"},
      {"--allow-root", "/a", "--dtype", "int8"},
      {"--allow-root", "/a", "--listen", "nocolon"},
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

}  // namespace
}  // namespace anisoscope::server
