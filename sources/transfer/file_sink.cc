#include "sources/transfer/file_sink.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anisoscope::transfer {
namespace {

// "bytes FIRST-LAST/TOTAL" (TOTAL may be "*", then -1); false when malformed.
bool ParseContentRange(absl::string_view value, int64_t* first, int64_t* last, int64_t* total) {
  if (!absl::ConsumePrefix(&value, "bytes ")) return false;
  const std::pair<absl::string_view, absl::string_view> range_total =
      absl::StrSplit(value, absl::MaxSplits('/', 1));
  const std::pair<absl::string_view, absl::string_view> first_last =
      absl::StrSplit(range_total.first, absl::MaxSplits('-', 1));
  if (!absl::SimpleAtoi(first_last.first, first) || !absl::SimpleAtoi(first_last.second, last)) {
    return false;
  }
  if (range_total.second == "*") {
    *total = -1;
    return *first <= *last;
  }
  return absl::SimpleAtoi(range_total.second, total) && *first <= *last && *last < *total;
}

}  // namespace

FileSink::FileSink(int fd, std::string path, int64_t start, std::optional<int64_t> expected_size,
                   Sha256Stream* hasher, absl::Duration progress_interval,
                   std::function<void(const DownloadProgress&)> on_progress)
    : fd_(fd),
      path_(std::move(path)),
      expected_size_(expected_size),
      hasher_(hasher),
      progress_interval_(progress_interval),
      on_progress_(std::move(on_progress)),
      written_(start) {}

absl::Status FileSink::Restart() {
  if (::ftruncate(fd_, 0) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot truncate ", path_, " to restart: ", std::strerror(errno)));
  }
  hasher_->Reset();
  written_ = 0;
  return absl::OkStatus();
}

absl::Status FileSink::Begin(int http_status, const ResponseHeaders& headers) {
  int64_t first = 0;
  if (http_status == 206) {
    const std::optional<std::string> range = headers.Get("Content-Range");
    int64_t last = 0;
    int64_t total = 0;
    if (!range.has_value() || !ParseContentRange(*range, &first, &last, &total)) {
      if (absl::Status restarted = Restart(); !restarted.ok()) return restarted;
      return absl::UnavailableError(
          "a 206 answer without a well-formed Content-Range; starting over from byte 0");
    }
    if (first != written_) {
      const int64_t asked = written_;
      if (absl::Status restarted = Restart(); !restarted.ok()) return restarted;
      return absl::UnavailableError(absl::StrCat("asked for bytes ", asked, "- and was sent bytes ",
                                                 first, "-", last, "; starting over from byte 0"));
    }
    if (expected_size_.has_value() && total >= 0 && total != *expected_size_) {
      return absl::DataLossError(absl::StrCat("the server's file is ", total,
                                              " bytes, the listing says ", *expected_size_));
    }
  } else if (written_ > 0) {
    // Any other 2xx is the whole file, whatever Range asked for.
    if (absl::Status restarted = Restart(); !restarted.ok()) return restarted;
  }
  int64_t length = 0;
  if (expected_size_.has_value() && http_status != 206 &&
      absl::SimpleAtoi(headers.Get("Content-Length").value_or(""), &length) &&
      length != *expected_size_) {
    return absl::DataLossError(absl::StrCat("the server's file is ", length,
                                            " bytes, the listing says ", *expected_size_));
  }
  return absl::OkStatus();
}

absl::Status FileSink::Write(absl::string_view bytes) {
  if (expected_size_.has_value() &&
      written_ + static_cast<int64_t>(bytes.size()) > *expected_size_) {
    // Nothing past the bound reaches the disk, whatever the server says.
    return absl::DataLossError(absl::StrCat("the body runs past the expected ", *expected_size_,
                                            " bytes; cut at ", written_));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                                   written_ + static_cast<int64_t>(done));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot write ", path_, " at byte ", written_ + static_cast<int64_t>(done),
                       ": ", wrote < 0 ? std::strerror(errno) : "nothing written"));
    }
    done += static_cast<size_t>(wrote);
  }
  hasher_->Update(bytes);
  written_ += static_cast<int64_t>(bytes.size());
  fetched_ += static_cast<int64_t>(bytes.size());
  Report(false);
  return absl::OkStatus();
}

absl::Status FileSink::Finish() {
  Report(true);
  if (expected_size_.has_value() && written_ != *expected_size_) {
    return absl::DataLossError(
        absl::StrCat("the body ended at ", written_, " bytes, the listing says ", *expected_size_));
  }
  return absl::OkStatus();
}

void FileSink::Report(bool last) {
  if (!on_progress_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!last && now - last_report_ < absl::ToChronoNanoseconds(progress_interval_)) return;
  last_report_ = now;
  const double seconds = std::chrono::duration<double>(now - began_).count();
  on_progress_(DownloadProgress{written_, expected_size_, seconds > 0 ? fetched_ / seconds : 0});
}

}  // namespace anisoscope::transfer
