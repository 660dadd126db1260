// Where a download's body goes: an open file, written at the offset the bytes belong to,
// hashed as it goes, never past the expected size. Knows where a resumed attempt starts and
// checks that the server's answer (206 and its Content-Range, or a 200 from byte 0) fits.
// Not thread-safe; memory does not depend on the file's size.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sources/transfer/curl_exchange.h"
#include "sources/transfer/download_progress.h"
#include "sources/transfer/sha256_stream.h"

namespace anisoscope::transfer {

class FileSink : public BodySink {
 public:
  // `fd` (borrowed) already holds `start` bytes that `hasher` has hashed. `path` names the
  // file in errors.
  FileSink(int fd, std::string path, int64_t start, std::optional<int64_t> expected_size,
           Sha256Stream* hasher, absl::Duration progress_interval,
           std::function<void(const DownloadProgress&)> on_progress);

  int64_t ResumeOffset() const override { return written_; }
  absl::Status Begin(int http_status, const ResponseHeaders& headers) override;
  absl::Status Write(absl::string_view bytes) override;

  // After the last answer: the size is the expected one (DATA_LOSS naming both otherwise);
  // reports the final progress.
  absl::Status Finish();
  int64_t written() const { return written_; }

 private:
  // Back to byte 0: the server sent the whole file, or a range we did not ask for.
  absl::Status Restart();
  void Report(bool last);

  const int fd_;
  const std::string path_;
  const std::optional<int64_t> expected_size_;
  Sha256Stream* const hasher_;
  const absl::Duration progress_interval_;
  const std::function<void(const DownloadProgress&)> on_progress_;
  int64_t written_ = 0;
  int64_t fetched_ = 0;  // body bytes written by this call (not those on disk before)
  const std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_report_ = began_;
};

}  // namespace anisoscope::transfer
