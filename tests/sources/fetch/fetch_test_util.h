// What the fetch tests share: a Hub server (hub_server.py) over a fixture folder in a temp
// dir, a cache and a client with fast retries, fixture files, and FetchStep values built by
// hand from the fixture (sha256 computed here, commit and etag from a HEAD of each file, as
// the listing would give them).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sources/cache/source_cache.h"
#include "sources/fetch/step_fetcher.h"
#include "sources/transfer/http_client.h"
#include "sources/transfer/sha256_stream.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/servers/server_process.h"

namespace anisoscope::fetch::testing {

constexpr int64_t kMiB = 1 << 20;

using source_servers::InCi;
using source_servers::PrerequisiteMissing;
using source_servers::ServerProcess;

inline std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `size` bytes that differ for every seed (so that a flipped byte changes the hash).
inline std::string Bytes(const std::string& seed, int64_t size) {
  std::string out(static_cast<size_t>(size), '\0');
  uint64_t state = std::hash<std::string>()(seed) | 1;
  for (char& c : out) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(state >> 56);
  }
  return out;
}

inline std::string FileSha256(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  transfer::Sha256Stream hasher;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hasher.Update(absl::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  return hasher.HexDigest();
}

// Bytes the cache's bound covers: the files in its repos' blobs/ (`.incomplete` included).
inline uint64_t BlobBytes(const std::filesystem::path& dir) {
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().parent_path().filename() != "blobs") continue;
    if (entry.is_regular_file() && !entry.is_symlink()) total += entry.file_size();
  }
  return total;
}

// Files under `dir` whose name ends in ".incomplete".
inline int IncompleteFiles(const std::filesystem::path& dir) {
  int count = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 11 && name.substr(name.size() - 11) == ".incomplete") ++count;
  }
  return count;
}

// Entries in one of the cache's record folders ("pins", "reservations").
inline int Records(const std::filesystem::path& cache_dir, const std::string& folder) {
  const std::filesystem::path dir = cache_dir / ".locks" / "anisoscope" / folder;
  if (!std::filesystem::exists(dir)) return 0;
  return static_cast<int>(std::distance(std::filesystem::directory_iterator(dir),
                                        std::filesystem::directory_iterator()));
}

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct FixtureFile {
  std::string path;
  std::string content;      // written as is, unless sparse_size is set
  int64_t sparse_size = 0;  // > 0: a sparse file of this size (truncate), content ignored
};

// A Hub server over a temp folder, a cache beside it, a client and a fetcher.
class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override { StartAll(64 * kMiB); }

  // (Re)makes the cache with `max_bytes` (the server keeps running).
  void MakeCache(uint64_t max_bytes) {
    fetcher_.reset();
    cache_.reset();
    cache::SourceCacheOptions options;
    options.dir = dir_.path() / "cache";
    options.max_bytes = max_bytes;
    absl::StatusOr<std::unique_ptr<cache::SourceCache>> cache = cache::SourceCache::Create(options);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = *std::move(cache);
    fetcher_ = std::make_unique<StepFetcher>(cache_.get(), client_.get());
  }

  void StartAll(uint64_t cache_max_bytes) {
    std::filesystem::create_directories(root());
    absl::StatusOr<std::unique_ptr<ServerProcess>> hub =
        ServerProcess::Start("hub_server.py", {"--root", root().string(), "--port", "0"}, 2);
    if (!hub.ok()) {
      if (InCi()) FAIL() << hub.status() << " (required in CI)";
      GTEST_SKIP() << "no Hub test server: " << hub.status();
    }
    hub_ = *std::move(hub);
    transfer::TransferOptions options;
    options.max_attempts = 4;
    options.initial_backoff = absl::Milliseconds(2);
    options.max_backoff = absl::Milliseconds(20);
    options.max_retry_after = absl::Milliseconds(50);
    options.connect_timeout = absl::Seconds(5);
    options.stall_timeout = absl::Seconds(2);
    options.progress_interval = absl::Milliseconds(10);
    absl::StatusOr<std::unique_ptr<transfer::HttpClient>> client =
        transfer::HttpClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    MakeCache(cache_max_bytes);
  }

  std::filesystem::path root() const { return dir_.path() / "hub"; }
  std::filesystem::path cache_dir() const { return dir_.path() / "cache"; }

  // Writes `files` as branch `branch` of ORG/NAME and returns the step as a listing gives
  // it (sizes from the disk, sha256 computed here, commit and etags from the server).
  FetchStep MakeStep(const std::string& repo_id, const std::string& branch,
                     const std::vector<FixtureFile>& files) {
    const std::filesystem::path folder = root() / repo_id / branch;
    for (const FixtureFile& file : files) {
      const std::filesystem::path path = folder / file.path;
      std::filesystem::create_directories(path.parent_path());
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << file.content;
      out.close();
      if (file.sparse_size > 0) std::filesystem::resize_file(path, file.sparse_size);
    }
    FetchStep step;
    step.cache_step.repo = cache::HubModelRepo(repo_id).value();
    step.cache_step.revision = branch;
    for (const FixtureFile& file : files) {
      const std::string url =
          absl::StrCat(hub_->url(), "/", repo_id, "/resolve/", branch, "/", file.path);
      transfer::GetRequest head;
      head.url = url;
      head.head = true;
      head.follow_redirects = false;
      absl::StatusOr<transfer::HttpResponse> answer = client_->Get(head);
      EXPECT_TRUE(answer.ok()) << answer.status();
      if (!answer.ok()) continue;
      step.cache_step.snapshot = answer->headers.Get("X-Repo-Commit").value_or("");
      const std::optional<std::string> linked = answer->headers.Get("X-Linked-Etag");
      const std::string etag = cache::NormalizeEtag(
          linked.has_value() ? *linked : answer->headers.Get("ETag").value_or(""));
      const std::filesystem::path path = folder / file.path;
      const uint64_t size = std::filesystem::file_size(path);
      step.cache_step.files.push_back(cache::StepFile{file.path, etag, size});
      // An LFS file's sha256 (its etag) is the listing's; computed here for the small ones.
      std::string sha256;
      if (linked.has_value()) {
        sha256 = size <= 64 * kMiB ? FileSha256(path) : etag;
        EXPECT_EQ(sha256, etag) << file.path;
      }
      step.files.push_back(FetchFile{url, sha256});
    }
    return step;
  }

  TestTempDir dir_;
  std::unique_ptr<ServerProcess> hub_;
  std::unique_ptr<transfer::HttpClient> client_;
  std::unique_ptr<cache::SourceCache> cache_;
  std::unique_ptr<StepFetcher> fetcher_;
};

}  // namespace anisoscope::fetch::testing
