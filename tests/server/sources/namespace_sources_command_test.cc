// `anisoscope-server namespaces set --allow-source`: a namespace's sources stored after each
// entry is checked (a bad one named, nothing stored), kept apart from its roots (a list not
// given is kept), both cleared when neither is given, and listed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "server/host_commands.h"
#include "storage/metrics_store.h"
#include "tests/common/test_temp_dir.h"

namespace anisoscope::server {
namespace {

using ::testing::HasSubstr;

int RunCommand(std::vector<std::string> args, std::string* out, std::string* err) {
  args.insert(args.begin(), "anisoscope-server");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out_stream;
  std::ostringstream err_stream;
  const int code =
      RunHostCommand(static_cast<int>(argv.size()), argv.data(), out_stream, err_stream);
  *out = out_stream.str();
  *err = err_stream.str();
  return code;
}

TEST(NamespaceSourcesCommandTest, SourcesAreCheckedStoredKeptApartFromRootsAndListed) {
  TestTempDir dir;
  const std::string db = dir.File("metrics.db");
  std::string out;
  std::string err;
  ASSERT_EQ(
      RunCommand({"namespaces", "set", "--db", db, "--namespace", "team", "--allow-root", "/data"},
                 &out, &err),
      0)
      << err;
  EXPECT_EQ(RunCommand({"namespaces", "set", "--db", db, "--namespace", "team", "--allow-source",
                        "hub:EleutherAI/*", "--allow-source", "s3://bad_bucket/"},
                       &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("s3://bad_bucket/"));
  ASSERT_EQ(RunCommand({"namespaces", "set", "--db", db, "--namespace", "team", "--allow-source",
                        "hub:EleutherAI/*", "--allow-source", "s3://runs/team/"},
                       &out, &err),
            0)
      << err;
  EXPECT_THAT(out, HasSubstr("hub:EleutherAI/*, s3://runs/team/"));
  {
    auto store = storage::MetricsStore::Open({db});
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ(*(*store)->NamespaceSources("team"),
              (std::vector<std::string>{"hub:EleutherAI/*", "s3://runs/team/"}));
    EXPECT_EQ(*(*store)->NamespaceRoots("team"), (std::vector<std::string>{"/data"}));
  }
  ASSERT_EQ(RunCommand({"namespaces", "list", "--db", db}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("ALLOWED SOURCES"));
  EXPECT_THAT(out, HasSubstr("team\t/data\thub:EleutherAI/* s3://runs/team/"));
  ASSERT_EQ(RunCommand({"namespaces", "set", "--db", db, "--namespace", "team"}, &out, &err), 0)
      << err;
  auto store = storage::MetricsStore::Open({db});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->NamespaceSources("team")->empty());
  EXPECT_TRUE((*store)->NamespaceRoots("team")->empty());
}

}  // namespace
}  // namespace anisoscope::server
