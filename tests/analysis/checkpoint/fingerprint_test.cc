// Checkpoint fingerprints: equal for the same bytes under other names, different for one
// changed byte or other file boundaries, and an unreadable file named.
#include "analysis/checkpoint/fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

class FingerprintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / "fingerprint_test";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path File(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  std::string Of(const std::vector<fs::path>& files) {
    absl::StatusOr<std::string> fingerprint = FingerprintFiles(files, FileGate::Host());
    EXPECT_TRUE(fingerprint.ok()) << fingerprint.status();
    return fingerprint.value_or("");
  }

  fs::path dir_;
};

TEST_F(FingerprintTest, TheSameBytesUnderOtherNamesHaveOneFingerprint) {
  const std::string weights(100000, 'w');
  const std::string a = Of({File("step100.bin", weights)});
  EXPECT_TRUE(std::regex_match(a, std::regex("xxh3-128:[0-9a-f]{32}"))) << a;
  EXPECT_TRUE(IsFingerprint(a));
  EXPECT_FALSE(IsFingerprint(a.substr(0, a.size() - 1)));
  EXPECT_FALSE(IsFingerprint("xxh3-128:0123456789ABCDEF0123456789abcdef"));
  EXPECT_EQ(Of({File("step200.bin", weights)}), a);
  std::string changed = weights;
  changed[54321] = 'x';
  EXPECT_NE(Of({File("step300.bin", changed)}), a);
  EXPECT_NE(Of({File("a", "ab"), File("b", "c")}), Of({File("c", "a"), File("d", "bc")}));
  EXPECT_EQ(Of({File("empty", "")}), Of({File("empty2", "")}));
}

TEST_F(FingerprintTest, AMissingFileIsNamed) {
  EXPECT_TRUE(StatusIs(FingerprintFiles({dir_ / "missing.safetensors"}, FileGate::Host()).status(),
                       absl::StatusCode::kNotFound, "missing.safetensors"));
}

}  // namespace
}  // namespace anisoscope::analysis
