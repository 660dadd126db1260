// The remote sources' flags: declared once, parsed with the size units the other size flags
// take, passed on to a child worker unchanged, and the cache folder a user already has.
#include "worker/source_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

namespace anisoscope::worker {
namespace {

// Parses `args` (without the program name) into `options`; false on a usage error.
bool Parse(const std::vector<std::string>& args, SourceOptions* options) {
  CLI::App app;
  AddSourceFlags(app, *options);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError&) {
    return false;
  }
  return true;
}

TEST(SourceFlagsTest, DefaultsAndSizeUnits) {
  SourceOptions defaults;
  ASSERT_TRUE(Parse({}, &defaults));
  EXPECT_EQ(defaults.cache_max_bytes, uint64_t{50} << 30);
  EXPECT_TRUE(defaults.cache_dir.empty());
  EXPECT_TRUE(defaults.endpoints.hub_endpoint.empty());

  SourceOptions sized;
  ASSERT_TRUE(Parse({"--cache-max-bytes", "2GiB"}, &sized));
  EXPECT_EQ(sized.cache_max_bytes, uint64_t{2} << 30);
  ASSERT_TRUE(Parse({"--cache-max-bytes", "123456"}, &sized));
  EXPECT_EQ(sized.cache_max_bytes, 123456u);
  SourceOptions zero;
  EXPECT_FALSE(Parse({"--cache-max-bytes", "0"}, &zero));
  EXPECT_FALSE(Parse({"--cache-max-bytes", "lots"}, &zero));
}

TEST(SourceFlagsTest, ChildWorkerArgumentsRoundTrip) {
  SourceOptions given;
  ASSERT_TRUE(Parse({"--hub-endpoint", "http://hub:1", "--hub-token-file", "/run/hf-token",
                     "--s3-endpoint", "http://minio:9000", "--s3-region", "eu-west-1",
                     "--cache-dir", "/scratch/cache", "--cache-max-bytes", "10GiB",
                     "--fetch-stall-timeout", "2.5"},
                    &given));
  SourceOptions child;
  ASSERT_TRUE(Parse(WorkerSourceArgs(given), &child));
  EXPECT_EQ(child.endpoints.hub_endpoint, "http://hub:1");
  EXPECT_EQ(child.endpoints.hub_token_file, "/run/hf-token");
  EXPECT_EQ(child.endpoints.s3_endpoint, "http://minio:9000");
  EXPECT_EQ(child.endpoints.s3_region, "eu-west-1");
  EXPECT_EQ(child.cache_dir, "/scratch/cache");
  EXPECT_EQ(child.cache_max_bytes, uint64_t{10} << 30);
  EXPECT_EQ(child.fetch_stall_timeout_seconds, 2.5);

  // Flags not given stay unset, for the child to resolve from the same environment.
  const std::vector<std::string> plain = WorkerSourceArgs(SourceOptions{});
  EXPECT_EQ(plain,
            (std::vector<std::string>{"--cache-max-bytes", std::to_string(uint64_t{50} << 30),
                                      "--fetch-stall-timeout", "60"}));
}

TEST(SourceFlagsTest, DefaultCacheDirIsTheUsersHuggingFaceCache) {
  const char* names[] = {"HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"};
  std::map<std::string, std::string> saved;
  for (const char* name : names) {
    if (const char* value = getenv(name)) saved[name] = value;
    unsetenv(name);
  }
  setenv("HOME", "/home/ada", 1);
  EXPECT_EQ(DefaultCacheDir(), "/home/ada/.cache/huggingface/hub");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(DefaultCacheDir(), "/xdg/huggingface/hub");
  setenv("HF_HOME", "/hf", 1);
  EXPECT_EQ(DefaultCacheDir(), "/hf/hub");
  setenv("HF_HUB_CACHE", "/hub-cache", 1);
  EXPECT_EQ(DefaultCacheDir(), "/hub-cache");
  SourceOptions options;
  EXPECT_EQ(CacheDirOf(options), "/hub-cache");
  options.cache_dir = "/given";
  EXPECT_EQ(CacheDirOf(options), "/given");
  for (const char* name : names) {
    unsetenv(name);
    if (auto it = saved.find(name); it != saved.end()) setenv(name, it->second.c_str(), 1);
  }
}

}  // namespace
}  // namespace anisoscope::worker
