#include "server/server_options.h"

#include <gtest/gtest.h>

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

TEST(ServerOptionsTest, HelpNeedsNothingElseAndListsEveryFlag) {
  auto options = Parse({"--help"});
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->help);
  for (const char* flag : {"--listen", "--db", "--allow-root", "--workers", "--device", "--threads",
                           "--batch-size", "--dtype", "--log-level", "--help"}) {
    EXPECT_NE(ServerUsage().find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace anisoscope::server
