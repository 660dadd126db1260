#include "analysis/checkpoint/checkpoint_prefetcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/test_temp_dir.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

class CheckpointPrefetcherTest : public ::testing::Test {
 protected:
  // A file of `bytes` bytes, written to the disk and dropped from the page cache.
  fs::path WriteEvicted(const std::string& name, size_t bytes) {
    const fs::path file = dir_ / name;
    std::ofstream(file, std::ios::binary) << std::string(bytes, 'w');
    const int fd = ::open(file.c_str(), O_RDONLY);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    return file;
  }

  // The fraction of `file`'s pages in the page cache (mincore).
  static double ResidentFraction(const fs::path& file) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    const size_t size = fs::file_size(file);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    const size_t page = ::sysconf(_SC_PAGESIZE);
    std::vector<unsigned char> resident((size + page - 1) / page);
    ::mincore(map, size, resident.data());
    ::munmap(map, size);
    size_t in_cache = 0;
    for (unsigned char r : resident) in_cache += r & 1;
    return static_cast<double>(in_cache) / resident.size();
  }

  const TestTempDir temp_;
  const fs::path dir_ = temp_.path();
};

TEST_F(CheckpointPrefetcherTest, ReadAheadLeavesTheWholeFileInThePageCache) {
  const fs::path file = WriteEvicted("model.safetensors", 8 << 20);
  const std::atomic<bool> running{false};
  ASSERT_TRUE(ReadAheadFile(file, FileGate::Host(), running));
  EXPECT_EQ(ResidentFraction(file), 1.0);
}

TEST_F(CheckpointPrefetcherTest, ReadAheadStopsWhenAsked) {
  const fs::path file = WriteEvicted("model.safetensors", 16 << 20);
  const std::atomic<bool> stopped{true};
  EXPECT_TRUE(ReadAheadFile(file, FileGate::Host(), stopped));
  EXPECT_LT(ResidentFraction(file), 1.0);
}

TEST_F(CheckpointPrefetcherTest, AMissingFileOrAFifoIsSkippedWithoutBlocking) {
  const std::atomic<bool> running{false};
  EXPECT_FALSE(ReadAheadFile(dir_ / "absent.safetensors", FileGate::Host(), running));
  ASSERT_EQ(::mkfifo((dir_ / "model.safetensors").c_str(), 0600), 0);
  std::ofstream(dir_ / "config.json") << "{}";
  EXPECT_FALSE(ReadAheadFile(dir_ / "model.safetensors", FileGate::Host(), running));
  CheckpointPrefetcher prefetcher;
  prefetcher.Start(dir_,
                   FileGate::Host());  // its weight file is the FIFO: the reader must not hang
  prefetcher.Start(dir_ / "absent", FileGate::Host());
  prefetcher.Stop();
}

TEST_F(CheckpointPrefetcherTest, PrefetchReadsTheFilesTheLoaderWouldRead) {
  std::ofstream(dir_ / "config.json") << "{}";
  const fs::path weights = WriteEvicted("pytorch_model.bin", 8 << 20);
  CheckpointPrefetcher prefetcher;
  prefetcher.Start(dir_, FileGate::Host());
  for (int i = 0; i < 500 && ResidentFraction(weights) < 1.0; ++i) ::usleep(10'000);
  EXPECT_EQ(ResidentFraction(weights), 1.0);
}

}  // namespace
}  // namespace anisoscope::analysis
