// ZipArchive on archives written byte by byte: zip64 central directories (what torch.save
// writes past 4 GiB) and lies about extents.
#include "analysis/checkpoint/zip_archive.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

// Little-endian bytes, appended.
struct Writer {
  std::string bytes;
  Writer& U(uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return *this;
  }
  Writer& S(const std::string& text) {
    bytes += text;
    return *this;
  }
};

constexpr uint64_t kAll = 0xffffffff;

// One stored entry "x/rec" = "hello" whose sizes and offset are all in zip64 fields.
// `directory_offset` lets a test lie about where the central directory is.
std::string Zip64Archive(uint64_t directory_offset = 60, uint64_t entry_size = 5) {
  Writer w;
  w.U(0x04034b50, 4).U(45, 2).U(0, 2).U(0, 2).U(0, 4).U(0, 4).U(kAll, 4).U(kAll, 4);
  w.U(5, 2).U(20, 2).S("x/rec").U(1, 2).U(16, 2).U(entry_size, 8).U(entry_size, 8).S("hello");
  EXPECT_EQ(w.bytes.size(), 60u);
  w.U(0x02014b50, 4).U(45, 2).U(45, 2).U(0, 2).U(0, 2).U(0, 4).U(0, 4).U(kAll, 4).U(kAll, 4);
  w.U(5, 2).U(28, 2).U(0, 2).U(0, 2).U(0, 2).U(0, 4).U(kAll, 4).S("x/rec");
  w.U(1, 2).U(24, 2).U(entry_size, 8).U(entry_size, 8).U(0, 8);
  const uint64_t record = w.bytes.size();
  w.U(0x06064b50, 4).U(44, 8).U(45, 2).U(45, 2).U(0, 4).U(0, 4).U(1, 8).U(1, 8);
  w.U(record - 60, 8).U(directory_offset, 8);
  w.U(0x07064b50, 4).U(0, 4).U(record, 8).U(1, 4);
  w.U(0x06054b50, 4).U(0, 2).U(0, 2).U(0xffff, 2).U(0xffff, 2).U(kAll, 4).U(kAll, 4).U(0, 2);
  return w.bytes;
}

absl::StatusOr<ZipArchive> OpenBytes(const std::string& bytes, const std::string& name) {
  const fs::path path = fs::path(::testing::TempDir()) / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  absl::StatusOr<std::shared_ptr<MappedFile>> mapped = MappedFile::Open(path, FileGate::Host());
  if (!mapped.ok()) return mapped.status();
  return ZipArchive::Open(*mapped, path.string());
}

TEST(ZipArchiveTest, Zip64DirectoryGivesTheEntryInPlace) {
  absl::StatusOr<ZipArchive> archive = OpenBytes(Zip64Archive(), "zip64.zip");
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ(archive->Names(), std::vector<std::string>{"x/rec"});
  absl::StatusOr<ZipEntryView> entry = archive->Entry("x/rec");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(entry->data), entry->size), "hello");
  EXPECT_EQ(entry->data, archive->file()->data() + 55);
  EXPECT_TRUE(absl::IsNotFound(archive->Entry("x/other").status()));
}

TEST(ZipArchiveTest, DirectoryOutsideTheFileIsRefused) {
  EXPECT_TRUE(StatusIs(OpenBytes(Zip64Archive(/*directory_offset=*/1 << 20), "far.zip").status(),
                       absl::StatusCode::kInvalidArgument,
                       "far.zip: corrupt zip archive: ", "central directory"));
}

TEST(ZipArchiveTest, EntryClaimingMoreBytesThanTheFileHasIsRefused) {
  absl::StatusOr<ZipArchive> archive =
      OpenBytes(Zip64Archive(60, /*entry_size=*/uint64_t{1} << 40), "long.zip");
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_TRUE(StatusIs(archive->Entry("x/rec").status(), absl::StatusCode::kInvalidArgument,
                       "long.zip: record 'x/rec' ", "runs past the end"));
}

TEST(ZipArchiveTest, NoEndOfDirectoryIsRefused) {
  EXPECT_TRUE(StatusIs(OpenBytes(std::string(100, 'x'), "plain.zip").status(),
                       absl::StatusCode::kInvalidArgument, "no end-of-directory record"));
  EXPECT_TRUE(StatusIs(OpenBytes("PK", "short.zip").status(), absl::StatusCode::kInvalidArgument,
                       "too short"));
}

}  // namespace
}  // namespace anisoscope::analysis
